"""A key a task's state is read from that holds another type than minitask keeps there
(a set where its result list should be, a list where the dead letters' sorted set
should be) is unreadable, never "never enqueued" (probe 13 M4; a real redis-server):
``status()`` says ``failed`` (as for a result no minitask wrote), ``get()`` raises a
``DecodeError`` naming the task, the key and both types instead of saying the task
is unknown, ``inspect`` and the dashboard note the key; a workflow step reads
``unreadable``; nothing is changed. A key of another type holds none of minitask's
tasks (a script that would add one refuses): the other keys, or another queue that
knows the id, still answer."""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest
import redis

from minitask import ConfigurationError, DecodeError, Minitask
from minitask.admin.workflows import _state
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import inspect as inspect_command
from minitask.dashboard.web import Dashboard

from tests.integration.test_foreign_result_records import awaited
from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call

pytestmark = [pytest.mark.integration, pytest.mark.app("wrongtype", on="server")]

#: How each type is planted, by the name Redis gives it.
PLANTERS: "dict[str, Callable[[redis.Redis[bytes], str], Any]]" = {
    "set": lambda client, key: client.sadd(key, b"x"),
    "string": lambda client, key: client.set(key, b"x"),
    "hash": lambda client, key: client.hset(key, b"x", b"y"),
}


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    app.task(name="t.add")(lambda x, y: x + y)
    yield operate_with(app, monkeypatch, inspect_command)


def said_unreadable(operated: Minitask, capsys: pytest.CaptureFixture[str], task_id: str,
                    key: str, held: str, kept: str) -> None:
    """Every reader of ``task_id`` names ``key``, what it holds and what it should."""
    why = f"key {key} holds a {held}, not the {kept} minitask keeps there"
    handle = operated.handle(task_id)
    assert handle.status() == "failed"
    with pytest.raises(DecodeError) as caught:
        handle.get(timeout=5)
    assert f"task {task_id!r}" in str(caught.value) and why in str(caught.value)
    assert awaited(operated, operated.handle(task_id).astatus()) == "failed"
    with pytest.raises(DecodeError, match=f"task {task_id!r}"):
        awaited(operated, operated.handle(task_id).aget(timeout=5))
    code, text = run(capsys, "inspect", "-A", "x", task_id)
    assert code == 0 and why in text and "never enqueued" not in text, text
    code, shown = run(capsys, "inspect", "-A", "x", "--json", task_id)
    assert code == 0 and json.loads(shown)["status"] == "failed", shown
    assert why in json.loads(shown)["note"]
    report = json.loads(call(Dashboard(operated), f"/api/task?id={task_id}")[2])
    assert why in report["task"]["note"], report


@pytest.mark.parametrize("held", sorted(PLANTERS))
def test_a_result_key_of_another_type_is_unreadable_and_named(
        operated: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        held: str) -> None:
    admin.sadd(AppKeys(operated.name).queues, b"default")
    key = queue_keys(operated.name, "default").result("odd")
    PLANTERS[held](admin, key)
    said_unreadable(operated, capsys, "odd", key, held, "list")
    assert admin.type(key) == held.encode()  # left as it was: not minitask's


def test_a_queue_key_of_another_type_leaves_an_id_never_sent_unknown(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    sent = operated.tasks["t.add"].delay(1, 2)
    dead = queue_keys(operated.name, "default").dead
    admin.rpush(dead, b"x")  # a list where the dead letters' sorted set is
    # the queue's keys are every task's: one broken says nothing of an id (SPEC: an id
    # the app never saw is unknown), and the other keys still answer for a task sent
    assert operated.handle("never-sent").status() == "unknown"
    assert operated.handle(sent.id).status() == "queued"
    assert admin.type(dead) == b"list"  # left as it was: not minitask's


def test_another_queue_that_knows_the_id_still_answers(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    sent = operated.tasks["t.add"].apply_async((1, 2), queue="other")
    admin.sadd(AppKeys(operated.name).queues, b"default")
    admin.set(queue_keys(operated.name, "default").leases, b"x")
    assert operated.handle(sent.id).status() == "queued"
    assert awaited(operated, operated.handle(sent.id).astatus()) == "queued"


def test_a_workflow_step_that_cannot_be_read_reads_unreadable_not_pending() -> None:
    assert _state("unreadable", b"key k holds a set") == "unreadable"
    assert _state("finished", b"") == "unreadable"
    assert _state("unknown", None) == "pending"


@pytest.mark.parametrize("held", ["list", "bytes"])
def test_a_group_whose_handle_record_cannot_be_read_is_not_said_never_sent(
        operated: Minitask, admin: "redis.Redis[bytes]", held: str) -> None:
    admin.sadd(AppKeys(operated.name).queues, b"default")
    key = operated.broker.workflows.keys("default").handle("g1")
    if held == "list":
        admin.rpush(key, b"x")
    else:
        admin.set(key, b"\xc1\xc1")
    with pytest.raises(ConfigurationError) as caught:
        operated.group_handle("g1")
    text = str(caught.value)
    assert f"the handle record {key} holds" in text and "no minitask wrote it" in text, text
    assert "unknown" not in text and "never" not in text, text
    # a handle's get() of an id Redis knows nothing else of says the same, not "unknown"
    with pytest.raises(DecodeError, match="the handle record"):
        operated.handle("g1").get(timeout=5)


def test_inspect_names_a_key_of_another_type_it_could_not_read(
        operated: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    # the task is found (queued, in its ready list), but its delivery count cannot be
    # read: inspect's note says so, once, rather than show a count of 0 as if read
    sent = operated.tasks["t.add"].delay(1, 2)
    deliveries = queue_keys(operated.name, "default").deliveries
    admin.rpush(deliveries, b"x")
    code, shown = run(capsys, "inspect", "-A", "x", "--json", sent.id)
    report = json.loads(shown)
    assert code == 0 and report["status"] == "queued", shown
    assert report["note"].count(f"key {deliveries} holds another type") == 1, shown
    # one the state script names already (the task's own result key) is not named twice
    result = queue_keys(operated.name, "default").result("gone")
    admin.set(result, b"x")
    admin.delete(result)
    admin.sadd(result, b"x")
    code, shown = run(capsys, "inspect", "-A", "x", "--json", "gone")
    report = json.loads(shown)
    assert code == 0 and report["status"] == "failed", shown
    assert report["note"].count(f"key {result} holds a set") == 1, shown
    assert report["note"].count(result) == 1, shown
