"""A plain send whose reply was lost lists its queue in the app's registry (review 29h
H1): the error advises ``app.handle(id).status()``, and a lookup by id asks the
registry for a queue no task declares (``apply_async(queue=...)``); unlisted, it said
``unknown`` of a queued task, and a re-send trusting it ran the task twice. A plain
``delay()`` (sync and asyncio) and a plain ``delay_many()`` chunk, as the flow path and
the batches already did. On a real redis-server; the lost reply a stand-in: the write
runs, then a ``sent`` BrokerError.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.cutting import lose_replies
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def _app(redis_server: RedisServer, name: str) -> Any:
    app = Minitask(name, broker=redis_server.url)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    t.delay("warm")  # connected, scripts loaded, the default queue listed
    return app, t


def _losing(transport: Any, queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every enqueue into ``queue`` runs, then its reply is lost."""
    lose_replies(transport, monkeypatch,
                 lambda calls, what: what == f"enqueue into queue {queue!r}")


def _listed(admin: "redis.Redis[bytes]", app: Minitask) -> set:
    return admin.smembers(app.broker.queues.app_keys.queues)


def test_a_plain_delay_whose_reply_is_lost_is_found_by_id(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = _app(redis_server, "lostplain")
    _losing(app.broker.queues.transport, "undeclared", monkeypatch)
    try:
        with pytest.raises(BrokerError) as lost:
            t.apply_async(("x",), queue="undeclared")
        monkeypatch.undo()
        task_id = lost.value.task_ids[0]
        assert lost.value.sent and f"app.handle({task_id!r}).status()" in str(lost.value)
        assert admin.hexists(QueueKeys(app.name, "undeclared").messages, task_id)
        assert b"undeclared" in _listed(admin, app)
        assert app.handle(task_id).status() == "queued"  # as the error advises: found
    finally:
        app.close()


def test_a_plain_delay_many_chunk_whose_reply_is_lost_lists_its_queue(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = _app(redis_server, "lostmany")

    @app.task(name="m", queue="many")
    def m(value: int) -> int:
        return value

    _losing(app.broker.queues.transport, "many", monkeypatch)
    try:
        with pytest.raises(BrokerError) as lost:
            m.delay_many([(i,) for i in range(1500)])
        monkeypatch.undo()
        assert lost.value.sent and len(lost.value.task_ids) == 1000  # the first chunk
        assert len(lost.value.unsent_ids) == 500
        assert b"many" in _listed(admin, app)  # listed once a chunk may be written
    finally:
        app.close()


def test_an_awaited_plain_delay_whose_reply_is_lost_is_found_by_id(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app, t = _app(redis_server, "alostplain")

    async def send() -> str:
        aio = app.async_broker()
        real = aio.run

        async def run(call: Any, what: str) -> Any:
            reply = await real(call, what)
            if what == "enqueue into queue 'undeclared'":
                raise BrokerError(f"could not {what}: Connection reset (reply lost)",
                                  sent=True)
            return reply

        aio.run = run  # type: ignore[method-assign]
        try:
            await t.aapply_async(("x",), queue="undeclared")
        except BrokerError as exc:
            assert exc.sent
            aio.run = real  # type: ignore[method-assign]
            return await app.handle(exc.task_ids[0]).astatus()
        finally:
            await app.aclose()
        raise AssertionError("the lost reply was not said")

    try:
        assert asyncio.run(send()) == "queued"
        assert b"undeclared" in _listed(admin, app)
    finally:
        app.close()
