"""The asyncio pool's round of one task costs as few event-loop turns and objects as
it can (issue 36): a slot's attempts run one after the other in one asyncio task (a
task made per attempt cost its making and a loop turn before it began), and the
loop's round trips to Redis share one timer for their timeout (a timer per round
trip cost its making, a heap push and its cancel), which still aborts a round trip
that runs past it."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, List

import pytest
import redis.asyncio

from minitask import Minitask, TaskContext
from minitask.worker.loop_acks import LoopLink
from tests.support.servers import RedisServer

DEADLINE = 30.0
PING = b"*1\r\n$4\r\nPING\r\n"


@pytest.mark.integration
@pytest.mark.app("aioturns", on="server")
def test_a_slots_attempts_run_in_one_asyncio_task(app: Minitask) -> None:
    seen: List[Any] = []  # the tasks themselves: an id may be reused once one ends

    def prerun(context: TaskContext) -> None:  # on the pool's loop, in the slot's task
        seen.append(asyncio.current_task())

    app.on("task_prerun", prerun)

    @app.task(name="noop")
    async def noop(index: int) -> int:
        return index

    handles = [noop.delay(index) for index in range(6)]
    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert [handle.get(timeout=DEADLINE) for handle in handles] == list(range(6))
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive()
    assert len(seen) == 6
    assert len({id(task) for task in seen}) == 1, "a task made per attempt"


@pytest.mark.integration
def test_round_trips_share_one_timeout_timer(
        start_redis: Callable[..., RedisServer]) -> None:
    server = start_redis()
    made: List[Any] = []

    async def main() -> List[Any]:
        link = LoopLink(lambda: redis.asyncio.Connection(host="127.0.0.1",
                                                         port=server.port), 30.0)
        await link.exchange(PING)  # connected: the timers of the connecting left out
        loop = asyncio.get_running_loop()
        call_at = loop.call_at

        def counted(*args: Any, **kwargs: Any) -> Any:
            made.append(args[1])
            return call_at(*args, **kwargs)

        loop.call_at = counted  # type: ignore[method-assign]
        try:
            return [await link.exchange(PING) for _ in range(50)]
        finally:
            loop.call_at = call_at  # type: ignore[method-assign]
            await link.close()

    assert asyncio.run(main()) == [b"PONG"] * 50
    assert len(made) <= 1, f"{len(made)} timers for 50 round trips"


@pytest.mark.integration
def test_a_round_trip_past_its_timeout_is_aborted_the_next_one_served(
        start_redis: Callable[..., RedisServer]) -> None:
    server = start_redis()
    blocking = b"*3\r\n$5\r\nBLPOP\r\n$12\r\nturns:nobody\r\n$2\r\n20\r\n"

    async def main() -> List[Any]:
        link = LoopLink(lambda: redis.asyncio.Connection(host="127.0.0.1",
                                                         port=server.port), 0.3)
        ends: List[Any] = []
        try:
            ends.append(await link.exchange(PING))
            try:  # (a BLPOP of 20 s; the deadline bounds the test, never a timed assert)
                await asyncio.wait_for(link.exchange(blocking), DEADLINE)
            except (ConnectionError, OSError, asyncio.IncompleteReadError) as exc:
                ends.append(type(exc).__name__)
            ends.append(await link.exchange(PING))
        finally:
            await link.close()
        return ends

    first, aborted, last = asyncio.run(main())
    assert first == last == b"PONG"
    assert aborted != b"PONG"
