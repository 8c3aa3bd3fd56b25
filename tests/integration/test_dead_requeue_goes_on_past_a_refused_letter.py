"""``dead requeue`` goes on past a letter Redis refuses (probe 29h, M1): a ready list of
another type refuses the call of each letter of that priority (revive.lua checks before
it writes), and the others are requeued all the same. The refused ones are named with
why, the key named; the count of those requeued is said; it exits 1. Redis's script
sha and line ("script: <sha>, on @user_script:NN") are in no message. A failure of
Redis itself midway still says what was requeued before it, then fails (a real
redis-server)."""
from __future__ import annotations

import json
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import dead as admin_dead
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import dead as dead_command
from minitask.dashboard.web import Dashboard
from minitask.errors import BrokerError
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call
from tests.unit.test_dashboard_actions import confirm

pytestmark = [pytest.mark.integration, pytest.mark.app("deadpast", on="server")]

DIED_MS = 1_700_000_000_000


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    app.task(name="t.add")(lambda x, y: x + y)
    return operate_with(app, monkeypatch, dead_command)


def plant(client: "redis.Redis[bytes]", app: Minitask, task_id: str, priority: int) -> None:
    """A dead letter of priority ``priority``, its message kept, as a worker leaves one."""
    keys = queue_keys(app.name, "default")
    client.sadd(AppKeys(app.name).queues, b"default")
    client.zadd(keys.dead, {task_id: DIED_MS + len(task_id)})
    client.hset(keys.messages, task_id, encode_message(
        Message(task_id, "t.add", [1, 2], {}, "default", priority, DIED_MS)))


def ready(client: "redis.Redis[bytes]", app: Minitask) -> List[bytes]:
    return sorted(task_id for key in queue_keys(app.name, "default").ready
                  if client.type(key) == b"list" for task_id in client.lrange(key, 0, -1))


def dead(client: "redis.Redis[bytes]", app: Minitask) -> List[bytes]:
    return sorted(client.zrange(queue_keys(app.name, "default").dead, 0, -1))


def ready_key(app: Minitask, priority: int) -> str:
    return queue_keys(app.name, "default").ready[9 - priority]


def refused(app: Minitask, task_id: str, priority: int) -> str:
    """What ``dead requeue`` says of a letter whose ready list holds a string."""
    return (f"dead letter '{task_id}' is not requeued: Redis refused it: WRONGTYPE minitask "
            f"key {ready_key(app, priority)} holds another type than the list minitask keeps "
            f"there (a string); nothing was written; inspect that key, then rename or delete it")


def no_script_noise(text: str) -> None:
    assert "user_script" not in text and "script: " not in text, text


def letters(admin: "redis.Redis[bytes]", app: Minitask) -> None:
    for task_id, priority in (("a5", 5), ("b5", 5), ("c3", 3)):
        plant(admin, app, task_id, priority)


@pytest.mark.parametrize("planted, requeued, left", [
    (3, ["a5", "b5"], ["c3"]),  # the last letter refused: those before it requeued
    (5, ["c3"], ["a5", "b5"]),  # the first refused: none after it stopped
])
def test_requeue_all_goes_on_past_a_refused_letter_and_says_each(
        operated: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        planted: int, requeued: List[str], left: List[str]) -> None:
    letters(admin, operated)
    admin.set(ready_key(operated, planted), "x")
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes")
    assert code == 1, text
    lines = text.splitlines()
    assert lines[0] == f"requeued {len(requeued)} dead letter(s)", text
    assert sorted(lines[1:]) == [refused(operated, task_id, planted) for task_id in left]
    no_script_noise(text)
    assert ready(admin, operated) == [task_id.encode() for task_id in requeued]
    assert dead(admin, operated) == [task_id.encode() for task_id in left]
    assert admin.get(ready_key(operated, planted)) == b"x"  # as it was


def test_requeue_by_ids_and_json_go_on_past_a_refused_letter(
        operated: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    letters(admin, operated)
    admin.set(ready_key(operated, 5), "x")
    code, text = run(capsys, "dead", "-A", "x", "requeue", "a5", "c3", "nosuch")
    assert code == 1, text
    assert text.splitlines() == ["requeued 1 dead letter(s)", refused(operated, "a5", 5),
                                 "no dead letter has the id 'nosuch'"]
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--json", "--all", "--yes")
    assert code == 1, text
    said = json.loads(text)
    assert said["requeued"] == 0 and said["not_found"] == []
    assert [(row["task_id"], row["reason"]) for row in said["not_requeued"]] == [
        (task_id, refused(operated, task_id, 5).split(" is not requeued: ", 1)[1])
        for task_id in ("a5", "b5")]
    no_script_noise(text)


def test_the_api_raises_for_a_refused_letter_with_no_script_noise(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    plant(admin, operated, "a5", 5)
    admin.set(ready_key(operated, 5), "x")
    with pytest.raises(BrokerError) as caught:
        operated.requeue_dead("a5")
    assert caught.value.reason in ("script", "wrong type")
    assert ready_key(operated, 5) in str(caught.value)
    no_script_noise(str(caught.value))


def test_the_dashboard_says_a_refused_letter_is_not_requeued(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    plant(admin, operated, "a5", 5)
    admin.set(ready_key(operated, 5), "x")
    dashboard = Dashboard(operated)
    status, headers, _ = confirm(dashboard, "/actions/requeue", "task_id=a5")
    assert status == "303 See Other"  # a notice, not a 503 page
    page = call(dashboard, headers["Location"])[2]
    assert "dead letter a5 is not requeued: Redis refused it" in page
    assert ready_key(operated, 5) in page
    no_script_noise(page)
    assert dead(admin, operated) == [b"a5"]


def test_a_failure_of_redis_midway_says_what_was_requeued_before_it(
        operated: Minitask, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    letters(admin, operated)
    real = admin_dead.revive_dead
    calls: List[str] = []

    def revive(app: Any, queue: str, task_id: str) -> str:
        calls.append(task_id)
        if len(calls) == 2:  # Redis gone after the first letter
            raise BrokerError("could not requeue: Redis went away", reason="unreachable")
        return real(app, queue, task_id)

    monkeypatch.setattr(admin_dead, "revive_dead", revive)
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes")
    assert code != 0 and code != 1, text  # Redis's failure, not "some not requeued"
    assert text.startswith("requeued 1 dead letter(s)\n"), text
    assert "Redis went away" in text
    assert len(ready(admin, operated)) == 1 and len(dead(admin, operated)) == 2
