"""``dead requeue`` says what it did (probe 9, M6): a letter whose id is not UTF-8 is
named with that reason, by its ``dead list`` form or by ``--all``, never as "no dead
letter has the id"; a letter whose message is gone is not counted requeued, and
nothing is written for it (revive.lua checks before it writes: a ready id with no
message would run nothing, the fetch drops it as a cancelled one)."""
from __future__ import annotations

import json
from typing import Any, Callable, List

import pytest
import redis

from minitask import Minitask, Task
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import dead as dead_command
from minitask.printable import printable

from tests.support.cli import operate_with, run


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    """``app`` as ``minitask dead`` loads it (it closes it as it ends: kept open)."""
    return operate_with(app, monkeypatch, dead_command)


def kill(client: "redis.Redis[bytes]", app: Minitask, task: Task[Any, Any]) -> str:
    """A call of ``task`` made a dead letter as a worker leaves one: its message kept."""
    handle = task.delay(1, 2)
    keys = queue_keys(app.name, "default")
    for ready in keys.ready:
        client.lrem(ready, 0, handle.id)
    client.zadd(keys.dead, {handle.id: 1_700_000_000_000})
    return handle.id


def plant(client: "redis.Redis[bytes]", app: Minitask, task_id: bytes) -> None:
    """A dead letter with no message (no minitask wrote it, or its message was deleted)."""
    client.sadd(AppKeys(app.name).queues, b"default")
    client.zadd(queue_keys(app.name, "default").dead, {task_id: 1_700_000_000_001})


def ready_ids(client: "redis.Redis[bytes]", app: Minitask) -> List[bytes]:
    return [task_id for ready in queue_keys(app.name, "default").ready
            for task_id in client.lrange(ready, 0, -1)]


def test_requeue_all_requeues_the_letters_with_a_message_and_says_why_of_the_rest(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", add: Task[Any, Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    queued = ready_ids(fake_redis, operated)  # the fixture's own queued call
    real = [kill(fake_redis, operated, add) for _ in range(2)]
    for raw in (b"ghost", b"\xff\xfe", b"\x1b[31mred"):
        plant(fake_redis, operated, raw)
    keys = queue_keys(operated.name, "default")
    messages = fake_redis.hgetall(keys.messages)
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes")
    assert code == 1, text  # not all done
    lines = text.splitlines()
    assert lines[0] == "requeued 2 dead letter(s)"
    assert sorted(lines[1:]) == sorted([
        "dead letter 'ghost' is not requeued: its message is gone (nothing to run); "
        "purge it",
        f"dead letter '{printable(chr(27) + '[31mred')}' is not requeued: its message is "
        f"gone (nothing to run); purge it",
        "dead letter '\\xff\\xfe' is not requeued: its id is not UTF-8 (no minitask wrote "
        "it); purge it"]), text
    assert "no dead letter has the id" not in text
    now_ready = ready_ids(fake_redis, operated)  # the letters in the dead set's order
    assert now_ready[:len(queued)] == queued
    assert sorted(now_ready[len(queued):]) == sorted(task_id.encode() for task_id in real)
    assert sorted(fake_redis.zrange(keys.dead, 0, -1)) == sorted(
        [b"ghost", b"\xff\xfe", b"\x1b[31mred"])
    # nothing written for the letters left: no message made up for them
    assert set(fake_redis.hkeys(keys.messages)) == set(messages)


def test_requeue_all_json_names_each_letter_not_requeued_with_the_reason(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", add: Task[Any, Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    kill(fake_redis, operated, add)
    plant(fake_redis, operated, b"ghost")
    plant(fake_redis, operated, b"\xff\xfe")
    code, text = run(capsys, "dead", "-A", "x", "requeue", "--all", "--yes", "--json")
    assert code == 1
    answer = json.loads(text)
    assert answer["requeued"] == 1 and answer["not_found"] == []
    assert sorted(answer["not_requeued"], key=lambda row: row["task_id"]) == [
        {"task_id": "\\xff\\xfe", "reason": "its id is not UTF-8 (no minitask wrote it); "
                                            "purge it"},
        {"task_id": "ghost", "reason": "its message is gone (nothing to run); purge it"}]


def test_an_id_dead_list_shows_is_requeued_or_refused_with_its_reason_never_not_found(
        operated: Minitask, fake_redis: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant(fake_redis, operated, b"\xff\xfe")
    plant(fake_redis, operated, b"ghost")
    code, listed = run(capsys, "dead", "-A", "x", "list")
    assert code == 0 and "\\xff\\xfe" in listed and "ghost" in listed
    code, text = run(capsys, "dead", "-A", "x", "requeue", "\\xff\\xfe", "ghost", "nobody")
    assert code == 1
    assert text.splitlines() == [
        "requeued 0 dead letter(s)",
        "dead letter '\\xff\\xfe' is not requeued: its id is not UTF-8 (no minitask wrote "
        "it); purge it",
        "dead letter 'ghost' is not requeued: its message is gone (nothing to run); purge it",
        "no dead letter has the id 'nobody'"], text
    code, text = run(capsys, "dead", "-A", "x", "purge", "\\xff\\xfe", "ghost")
    assert (code, text) == (0, "purged 2 dead letter(s)\n")


def test_requeue_dead_of_a_letter_with_no_message_writes_nothing(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app()
    try:
        plant(redis_client, app, b"ghost")
        keys = queue_keys(app.name, "default")
        assert app.requeue_dead("ghost") is False
        assert redis_client.zrange(keys.dead, 0, -1) == [b"ghost"]
        assert not redis_client.hexists(keys.messages, b"ghost")
        assert ready_ids(redis_client, app) == [] and redis_client.llen(keys.wake) == 0
    finally:
        app.close()
