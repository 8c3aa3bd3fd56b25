"""adelay() sends the transport's packed EVALSHA on a pooled redis.asyncio connection:
on a real redis-server, a flushed script cache, a killed connection and a refused
call each leave the next adelay() working, and a task sent so is the one delay() sends."""
from __future__ import annotations

import asyncio

import pytest

from minitask import BrokerError, Minitask
from minitask.wire.serializer import decode_message
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app("aiopacked", on="server")]

DEADLINE = 60.0


def test_adelay_stores_the_message_delay_stores(app: Minitask) -> None:
    @app.task(queue="q-packed", priority=7)
    def add(a: int, b: int) -> int:
        return a + b

    async def send() -> str:
        try:
            return (await add.adelay(2, b=3)).id
        finally:
            await app.aclose()

    async_id = asyncio.run(asyncio.wait_for(send(), DEADLINE))
    sync_id = add.delay(2, b=3).id
    queues = app.broker.queues
    sent = [decode_message(queues.message_body("q-packed", task_id) or b"")
            for task_id in (async_id, sync_id)]
    assert [(m.task, m.args, m.kwargs, m.queue, m.priority) for m in sent] == \
        [(add.name, [2], {"b": 3}, "q-packed", 7)] * 2
    assert queues.counts("q-packed")["ready"] == 2


def test_adelay_goes_on_after_a_script_flush_and_a_killed_connection(
        app: Minitask, redis_server: RedisServer) -> None:
    @app.task
    def noop(i: int) -> None:
        """Only sent."""

    admin = redis_server.client()

    async def scenario() -> None:
        await noop.adelay(0)
        admin.script_flush()  # NOSCRIPT: loaded again, then sent
        await noop.adelay(1)
        admin.client_kill_filter(_type="normal", skipme=True)  # the pool's connection too
        for i in range(2, 5):
            try:
                await noop.adelay(i)
            except BrokerError:
                continue  # a call on the dead connection may fail once, and say so
        await noop.adelay(5)
        await app.aclose()

    try:
        asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    finally:
        admin.close()
    assert app.broker.queues.counts("default")["ready"] >= 4


def test_a_refused_call_leaves_the_connection_usable(app: Minitask,
                                                     redis_server: RedisServer) -> None:
    @app.task(queue="q-refused")
    def noop(i: int) -> None:
        """Only sent."""

    admin = redis_server.client()
    messages = app.broker.queues.keys("q-refused").messages
    admin.set(messages, "not a hash")

    async def scenario() -> None:
        with pytest.raises(BrokerError, match="WRONGTYPE"):
            await noop.adelay(0)
        admin.delete(messages)
        for i in range(1, 4):  # every reply read belongs to its own call
            await noop.adelay(i)
        await app.aclose()

    try:
        asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    finally:
        admin.close()
    assert app.broker.queues.counts("q-refused")["ready"] == 3
