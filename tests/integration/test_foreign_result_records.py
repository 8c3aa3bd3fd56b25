"""A task's result record (``result:<id>``) that no minitask wrote is read tolerantly,
and every error about it names the task and the key (probe, issue 29; a real
redis-server): a time beyond any datetime (2**63, 1e17, -1e15) never makes the
dashboard's task page or ``/api/task`` fail; an empty entry or an outcome of an
unknown status is unreadable: ``status()`` says ``failed`` (the task has ended: only
an ended task keeps a record), ``get()`` raises a ``DecodeError`` naming the task and
its key, ``inspect`` notes it; a planted progress record of 20 MB is not read whole."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Iterator

import msgpack
import pytest
import redis

from minitask import DecodeError, Minitask, group
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import inspect as inspect_command
from minitask.dashboard.web import Dashboard
from minitask.wire.message import ENVELOPE_VERSION, Outcome
from minitask.wire.serializer import encode_outcome, pack_progress

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call

pytestmark = [pytest.mark.integration, pytest.mark.app("foreignres", on="server")]

FAR_TIMES = [2 ** 63, 10 ** 17, -10 ** 15]


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    app.task(name="t.add")(lambda x, y: x + y)
    yield operate_with(app, monkeypatch, inspect_command)


def plant(client: "redis.Redis[bytes]", app: Minitask, task_id: str, record: bytes) -> str:
    """``record`` as the result of ``task_id`` in queue ``default``; returns its key."""
    client.sadd(AppKeys(app.name).queues, b"default")
    key = queue_keys(app.name, "default").result(task_id)
    client.rpush(key, record)
    return key


def raw_outcome(**fields: Any) -> bytes:
    base = {"v": ENVELOPE_VERSION, "status": "succeeded", "finished_at_ms": 1_700_000_000_000,
            "value": 3, "exc_type": "", "message": "", "traceback": "", "reason": "",
            "attempt": 1, "extra": {}}
    base.update(fields)
    return msgpack.packb(base, use_bin_type=True)


def awaited(app: Minitask, step: Awaitable[Any]) -> Any:
    """``step``'s result, the app's async connections closed after it."""
    async def run() -> Any:
        try:
            return await asyncio.wait_for(step, 60)
        finally:
            await app.aclose()
    return asyncio.run(run())


def inspected(capsys: pytest.CaptureFixture[str], task_id: str) -> Any:
    code, text = run(capsys, "inspect", "-A", "x", task_id)
    assert code == 0, text
    code, shown = run(capsys, "inspect", "-A", "x", "--json", task_id)
    assert code == 0, shown
    return text, json.loads(shown)


@pytest.mark.parametrize("finished_ms", FAR_TIMES)
def test_a_result_whose_time_is_no_time_is_shown_by_every_reader_with_a_note(
        operated: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        finished_ms: int) -> None:
    plant(admin, operated, "far", encode_outcome(Outcome("succeeded", finished_ms, value=3,
                                                         attempt=1)))
    handle = operated.handle("far")
    assert handle.status() == "succeeded" and handle.get(timeout=5) == 3
    note = f"finished_at_ms {finished_ms}) is no time minitask writes"
    for path in ("/task?id=far", "/api/task?id=far"):
        status, _, page = call(Dashboard(operated), path)
        assert status == "200 OK", page
    report = json.loads(call(Dashboard(operated), "/api/task?id=far")[2])
    assert report["task"]["finished_at"] is None and note in report["task"]["note"]
    assert report["task"]["value"] == 3 and report["task"]["status"] == "succeeded"
    text, shown = inspected(capsys, "far")
    assert note in text and shown["finished_at"] is None


#: Result records no minitask writes, by what makes each unreadable.
UNREADABLE = {
    "empty": (b"", "it is empty"),
    "banana": (raw_outcome(status="banana"), "'banana'"),
    "no-exc-type": (raw_outcome(exc_type=None), "field 'exc_type' is None"),
    "not-msgpack": (b"\xc1\xc1", "cannot decode"),
    "retrying": (raw_outcome(status="retrying"), "'retrying'"),
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_an_unreadable_result_reads_failed_and_every_error_names_the_task_and_key(
        operated: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        kind: str) -> None:
    record, why = UNREADABLE[kind]
    key = plant(admin, operated, "odd", record)
    handle = operated.handle("odd")
    assert handle.status() == "failed"
    assert handle.ready() and handle.failed() and not handle.successful()
    with pytest.raises(DecodeError) as caught:
        handle.get(timeout=5)
    text = str(caught.value)
    assert "task 'odd'" in text and key in text and why in text, text
    assert awaited(operated, operated.handle("odd").astatus()) == "failed"
    with pytest.raises(DecodeError, match="task 'odd'"):
        awaited(operated, operated.handle("odd").aget(timeout=5))
    shown_text, shown = inspected(capsys, "odd")
    assert shown["status"] == "failed", shown
    assert why in shown["note"] and "status       failed" in shown_text, shown_text
    for path in ("/task?id=odd", "/api/task?id=odd"):
        status, _, page = call(Dashboard(operated), path)
        assert status == "200 OK", page
    assert admin.lrange(key, 0, -1) == [record]  # left as it was: not minitask's


def test_a_group_with_an_empty_result_counts_that_member_failed(
        operated: Minitask, admin: "redis.Redis[bytes]") -> None:
    add = operated.task(name="t.sum")(lambda x, y: x + y)
    sent = group(add.s(1, 2), add.s(3, 4)).apply_async()
    first = sent.handles[0].id
    keys = queue_keys(operated.name, "default")
    admin.hdel(keys.messages, first)  # ended: its message gone, an empty record kept
    admin.rpush(keys.result(first), b"")
    assert sent.status() == {"failed": 1, "queued": 1}
    assert operated.group_handle(sent.id).status() == {"failed": 1, "queued": 1}


def test_a_planted_progress_message_of_20_mb_is_not_read_whole(
        operated: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    plant(admin, operated, "big", encode_outcome(Outcome("succeeded", 1_700_000_000_000,
                                                         value=3)))
    key = queue_keys(operated.name, "default").progress("big")
    admin.set(key, pack_progress(1, 2, "x" * 20_000_000, 1_700_000_000_000))
    assert operated.handle("big").progress() is None
    assert awaited(operated, operated.handle("big").aprogress()) is None
    text, shown = inspected(capsys, "big")
    assert len(text) < 100_000 and shown["progress"] is None
    assert "progress" in shown["note"], shown
    status, _, page = call(Dashboard(operated), "/api/task?id=big")
    assert status == "200 OK" and len(page) < 100_000
    admin.set(key, pack_progress(1, 2, "fine", 1_700_000_000_000))
    assert operated.handle("big").progress().message == "fine"  # type: ignore[union-attr]
