"""Async producers on a real redis-server: calls waiting for results never take the
connections enqueues need, and a full pool waits for a free connection."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator, List

import pytest

from minitask import Minitask

pytestmark = pytest.mark.integration

DEADLINE = 90.0


@pytest.fixture
def app(redis_server: Any) -> Iterator[Minitask]:
    client = redis_server.client()
    client.flushall()
    client.close()
    made = Minitask("aiowaits", broker=redis_server.url)
    yield made
    made.close()


def test_300_adelay_calls_succeed_while_150_aget_calls_wait(app: Minitask) -> None:
    """redis-py's pool holds 100 connections: the waits used to hold them all, and
    every adelay() failed with "Too many connections"."""

    @app.task
    def slow_one(n: int) -> int:
        return n

    @app.task(queue="elsewhere")
    def sent(n: int) -> int:
        return n

    waited_for = [slow_one.delay(n) for n in range(150)]

    def serve_default_queue() -> int:
        worker = app.worker(queues=["default"])
        ran, deadline = 0, time.monotonic() + DEADLINE
        while ran < 150:
            assert time.monotonic() < deadline, "the worker never ran the 150 tasks"
            ran += 1 if worker.run_once() else 0
        return ran

    async def scenario() -> List[Any]:
        waits = [asyncio.ensure_future(handle.aget(timeout=DEADLINE)) for handle in waited_for]
        await asyncio.sleep(0.5)  # the waits hold their connections by now
        assert not any(wait.done() for wait in waits)
        handles = await asyncio.gather(*(sent.adelay(n) for n in range(300)))
        ran = await asyncio.get_running_loop().run_in_executor(None, serve_default_queue)
        assert ran == 150
        values = await asyncio.gather(*waits)
        await app.aclose()
        return [handles, values]

    handles, values = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert len({handle.id for handle in handles}) == 300
    assert app.broker.queues.counts("elsewhere")["ready"] == 300
    assert values == list(range(150))


def test_a_full_pool_waits_for_a_connection_rather_than_failing(
        redis_server: Any) -> None:
    app = Minitask("aiofull", broker=f"{redis_server.url}?max_connections=5")

    @app.task(queue="full")
    def sent(n: int) -> int:
        return n

    async def scenario() -> int:
        handles = await asyncio.gather(*(sent.adelay(n) for n in range(200)))
        await app.aclose()
        return len(handles)

    try:
        redis_server.client().flushall()
        assert asyncio.run(asyncio.wait_for(scenario(), DEADLINE)) == 200
        assert app.broker.queues.counts("full")["ready"] == 200
    finally:
        app.close()
