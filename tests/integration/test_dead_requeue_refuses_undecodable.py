"""A dead letter whose message cannot be decoded is not requeued (probe 10, L3): a
worker would only dead-letter it again. As one whose message is gone (probe 9, M6), it
is named with the reason, stays in the dead set for ``dead show`` and purge, and
nothing is written for it; ``dead requeue`` then exits 1. A message written by a newer
minitask is requeued as it is: a worker of that minitask reads it (a real
redis-server)."""
from __future__ import annotations

import json
from typing import List

import msgpack
import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import dead as dead_command
from minitask.dashboard.web import Dashboard
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call
from tests.unit.test_dashboard_actions import confirm

pytestmark = [pytest.mark.integration, pytest.mark.app("deadrq", on="server")]

DIED_MS = 1_700_000_000_000
GARBAGE = b"\xc1 no message minitask writes"
#: A message of envelope version 2: this minitask reads version 1.
NEWER = msgpack.packb({"v": 2, "id": "newer", "task": "t.add", "args": [1, 2]})
WHY = ("its message cannot be decoded (cannot decode message: FormatError): a worker "
       "would dead-letter it again; purge it")


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    app.task(name="t.add")(lambda x, y: x + y)
    return operate_with(app, monkeypatch, dead_command)


def plant(client: "redis.Redis[bytes]", app: Minitask, task_id: str, body: bytes) -> None:
    keys = queue_keys(app.name, "default")
    client.sadd(AppKeys(app.name).queues, b"default")
    client.zadd(keys.dead, {task_id: DIED_MS})
    client.hset(keys.messages, task_id, body)


def ready(client: "redis.Redis[bytes]", app: Minitask) -> List[bytes]:
    return [task_id for key in queue_keys(app.name, "default").ready
            for task_id in client.lrange(key, 0, -1)]


def good(task_id: str) -> bytes:
    return encode_message(Message(task_id, "t.add", [1, 2], {}, "default", 5, DIED_MS))


def test_requeue_of_an_undecodable_message_is_refused_with_why_and_writes_nothing(
        operated: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant(admin, operated, "bad", GARBAGE)
    plant(admin, operated, "fine", good("fine"))
    keys = queue_keys(operated.name, "default")
    code, text = run(capsys, "dead", "-A", "x", "requeue", "bad", "fine")
    assert code == 1, text
    assert text.splitlines() == ["requeued 1 dead letter(s)",
                                 f"dead letter 'bad' is not requeued: {WHY}"]
    assert admin.zrange(keys.dead, 0, -1) == [b"bad"]
    assert ready(admin, operated) == [b"fine"]
    assert admin.hget(keys.messages, "bad") == GARBAGE  # as it was
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--json", "bad")
    assert code == 1 and json.loads(text) == {
        "requeued": 0, "unconfirmed": 0, "not_found": [],
        "not_requeued": [{"task_id": "bad", "reason": WHY}]}
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes")
    assert (code, text) == (1, f"requeued 0 dead letter(s)\ndead letter 'bad' is not "
                               f"requeued: {WHY}\n")
    assert operated.requeue_dead("bad") is False
    assert admin.zrange(keys.dead, 0, -1) == [b"bad"] and ready(admin, operated) == [b"fine"]


def test_the_dashboard_says_an_undecodable_letter_is_not_requeued(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    plant(admin, operated, "bad", GARBAGE)
    dashboard = Dashboard(operated)
    status, headers, _ = confirm(dashboard, "/actions/requeue", "task_id=bad")
    assert status == "303 See Other"
    page = call(dashboard, headers["Location"])[2]
    assert "dead letter bad is not requeued: its message cannot be decoded" in page
    assert admin.zrange(queue_keys(operated.name, "default").dead, 0, -1) == [b"bad"]


def test_a_message_of_a_newer_minitask_is_requeued_as_it_is(
        operated: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant(admin, operated, "newer", NEWER)
    code, text = run(capsys, "dead", "-A", "x", "requeue", "newer")
    assert (code, text) == (0, "requeued 1 dead letter(s)\n")
    keys = queue_keys(operated.name, "default")
    assert ready(admin, operated) == [b"newer"]
    assert admin.hget(keys.messages, "newer") == NEWER and admin.zcard(keys.dead) == 0
