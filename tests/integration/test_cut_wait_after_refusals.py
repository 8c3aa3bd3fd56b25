"""A WAIT the socket timeout cuts short (a client whose socket timeout could not be read)
never pre-empts what a write's replies say (review 29l, M): the cut raised as WAIT's
reply was read, before an ``app.batch()`` block's refusals were put in place and before
the calls Redis answered NOSCRIPT for were run, so calls Redis refused, or never ran,
were told written (a DurabilityError naming them, their handles valid). Now the cut is
WAIT's reply, said after the refusals (kept, as a short WAIT, by a send of several
writes), and the calls that met NOSCRIPT run first. The same for a single durable send,
sync and async: enqueue_now writes nothing (-1) on a key of another type and enqueue.lua
then refuses; told written before. On a real redis-server with no replica.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List

import pytest
import redis

from minitask import Minitask, chain
from minitask.broker.keys import QueueKeys
from minitask.errors import BatchNotSent, BrokerError, DurabilityError
from tests.support.cut_waits import wait_cut_app
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_batch_refused_in_part_whose_wait_is_cut_names_only_what_redis_holds(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = wait_cut_app(redis_server, "cutpart", monkeypatch)
    admin.set(QueueKeys(app.name, "qb").messages, "planted")
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as failed:
            with app.batch():
                for queue in ("qa", "qb", "qc"):
                    handles.append(t.apply_async((queue,), queue=queue))
        error, ids = failed.value, [h.id for h in handles]
        assert not isinstance(error, DurabilityError), str(error)  # qb was refused
        assert error.sent and "WRONGTYPE" in str(error), str(error)
        assert error.enqueued_ids == [ids[0], ids[2]] == error.task_ids
        assert error.unsent_ids == [ids[1]]
        assert error.unconfirmed_ids == [ids[0], ids[2]]  # written, never the refused
        assert "not confirmed" in str(error)
        assert handles[0].status() == handles[2].status() == "queued"
        with pytest.raises(BatchNotSent):
            handles[1].status()
    finally:
        app.close()


def test_a_batch_that_met_noscript_and_a_cut_wait_is_written_as_it_says(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = wait_cut_app(redis_server, "cutnoscript", monkeypatch)
    admin.script_flush()  # the calls meet NOSCRIPT: run after the first WAIT
    try:
        with pytest.raises(DurabilityError) as unconfirmed:
            with app.batch():
                handles = [t.apply_async((queue,), queue=queue) for queue in ("qa", "qb")]
        assert unconfirmed.value.task_ids == [h.id for h in handles]
        assert [h.status() for h in handles] == ["queued", "queued"]  # (was: never run)
    finally:
        app.close()


def _sync(t: Any) -> Callable[[], Any]:
    return lambda: t.apply_async(("x",))


def _async(app: Minitask, t: Any) -> Callable[[], Any]:
    async def send() -> Any:
        try:
            return await t.aapply_async(("x",))
        finally:
            await app.aclose()

    return lambda: asyncio.run(send())


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_durable_send_refused_after_a_cut_wait_says_refused_not_written(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch, twin: str) -> None:
    app, t = wait_cut_app(redis_server, f"cutone{twin}", monkeypatch)
    admin.set(QueueKeys(app.name, "default").messages, "planted")  # enqueue_now: -1
    try:
        with pytest.raises(BrokerError) as refused:
            (_sync(t) if twin == "sync" else _async(app, t))()
        assert not isinstance(refused.value, DurabilityError), str(refused.value)
        assert not refused.value.sent and "WRONGTYPE" in str(refused.value)
        assert not refused.value.task_ids and not refused.value.unconfirmed_ids
    finally:
        app.close()


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_durable_send_that_met_noscript_and_a_cut_wait_is_written(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch, twin: str) -> None:
    app, t = wait_cut_app(redis_server, f"cutload{twin}", monkeypatch)
    admin.script_flush()
    try:
        with pytest.raises(DurabilityError) as unconfirmed:
            (_sync(t) if twin == "sync" else _async(app, t))()
        assert app.handle(unconfirmed.value.task_id).status() == "queued"  # (was: unknown)
        assert "made the write" in str(unconfirmed.value)
    finally:
        app.close()


def test_a_workflow_started_after_noscript_and_a_cut_wait_is_written(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = wait_cut_app(redis_server, "cutflow", monkeypatch)
    admin.script_flush()  # its start meets NOSCRIPT: told "written and runs" unrun before
    try:
        with pytest.raises(DurabilityError) as unconfirmed:
            chain(t.si("a"), t.si("b")).delay()
        assert "was written to Redis and runs" in str(unconfirmed.value)
        # its first step queued (was: nothing written)
        assert admin.hlen(QueueKeys(app.name, "default").messages) == 1
    finally:
        app.close()
