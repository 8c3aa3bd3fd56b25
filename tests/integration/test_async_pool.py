"""The asyncio pool, cancel(running=True) through Redis, and the async producer, on a real
redis-server."""
from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask, TaskFailed, current_task
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app("aiotest", on="server")]

DEADLINE = 60.0


#: The workers _run started in this test, stopped after it whatever its outcome.
_STARTED: List[Any] = []


@pytest.fixture(autouse=True)
def _workers_stopped(app: Minitask) -> Iterator[None]:
    """A test that fails leaves no worker running: one left behind served the next
    tests' tasks (the same app name), and failed them in turn. On ``app``, so that
    they stop before it closes: closed under a running worker, its connections failed
    with "Connection closed by server", logged as an outage the test never had."""
    yield
    while _STARTED:
        worker, thread = _STARTED.pop()
        worker.stop()
        thread.join(timeout=DEADLINE)


def _run(worker: Any) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    _STARTED.append((worker, thread))
    return thread


def test_asyncio_pool_runs_2000_sleeping_coroutines_200_at_a_time(app: Minitask) -> None:
    running: List[int] = [0, 0]  # now, most at once

    gate = time.monotonic() + DEADLINE / 4

    @app.task
    async def nap(i: int) -> int:
        running[0] += 1
        running[1] = max(running[1], running[0])
        # the first ones wait for the pool to fill (bounded), so that how many run at
        # once does not hang on how fast a loaded machine fetches
        while running[1] < 200 and time.monotonic() < gate:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        running[0] -= 1
        return i

    handles = nap.delay_many([(i,) for i in range(2000)])
    worker = app.worker(pool="asyncio", concurrency=200)
    started = time.monotonic()
    thread = _run(worker)
    try:
        assert sum(h.get(timeout=DEADLINE) for h in handles) == sum(range(2000))
        print(f"\n2000 x sleep(0.05) at -c 200: {time.monotonic() - started:.2f} s")
        assert running[1] == 200  # concurrent, and never over -c
    finally:  # a worker left running would take the next tests' tasks
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
    assert app.broker.queues.counts("default")["running"] == 0


def test_coroutine_over_its_timeout_fails_and_the_loop_goes_on(app: Minitask) -> None:
    @app.task(timeout=0.2)
    async def hangs() -> None:
        await asyncio.sleep(60)

    @app.task
    def plain(x: int) -> int:  # a plain function runs off the loop, in its executor
        context = current_task()
        assert context is not None
        return x + 1

    hung, after = hangs.delay(), plain.delay(1)
    worker = app.worker(pool="asyncio", concurrency=4)
    thread = _run(worker)
    with pytest.raises(TaskFailed) as failed:
        hung.get(timeout=DEADLINE)
    assert failed.value.exc_type == "TimeLimitExceeded"
    assert after.get(timeout=DEADLINE) == 2
    assert plain.delay(2).get(timeout=DEADLINE) == 3
    worker.stop()
    thread.join(timeout=DEADLINE)


def test_thread_pool_task_hears_cancel_running_through_redis(app: Minitask) -> None:
    started = threading.Event()

    @app.task
    def polite() -> str:
        context = current_task()
        assert context is not None
        started.set()
        deadline = time.monotonic() + 30
        while not context.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        return "noticed" if context.cancel_requested else "never told"

    worker = app.worker(pool="thread", concurrency=2)
    thread = _run(worker)
    handle = polite.delay()
    assert started.wait(DEADLINE)
    asked = time.monotonic()
    assert handle.cancel(running=True) is True
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=5)
    assert failed.value.exc_type == "Cancelled"
    assert time.monotonic() - asked < 1.0  # within one second, as guide/asyncio states
    worker.stop()
    thread.join(timeout=DEADLINE)


def test_grace_over_cancels_coroutines_and_gives_their_tasks_back(app: Minitask) -> None:
    cancelled: List[bool] = []
    began: List[bool] = []

    @app.task
    async def stubborn() -> None:
        began.append(True)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    handle = stubborn.delay()
    worker = app.worker(pool="asyncio", concurrency=2, grace=0.2)
    thread = _run(worker)
    # begun, not only leased ("running"): a leased attempt not yet begun when the
    # worker stops is given back without beginning
    wait_until(lambda: began and handle.status() == "running", timeout=DEADLINE,
               message="running")
    worker.stop()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
    assert cancelled == [True]
    assert handle.status() == "queued"  # given back, not failed: it runs again elsewhere


def test_a_coroutine_that_blocks_the_loop_is_named_with_what_to_do_while_it_blocks(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    # time.sleep or a synchronous client in an async def held every attempt of the
    # loop, and nothing said why
    release = threading.Event()

    @app.task
    async def blocking() -> str:
        release.wait(DEADLINE)  # a blocking call on the loop's thread
        return "done"

    @app.task
    async def polite() -> str:
        await asyncio.sleep(0)
        return "polite"

    held = blocking.delay()
    waiting = polite.delay()
    worker = app.worker(pool="asyncio", concurrency=4)
    with caplog.at_level(logging.WARNING, logger="minitask.worker.pools.watchdog"):
        thread = _run(worker)

        def said() -> List[str]:
            return [record.getMessage() for record in caplog.records
                    if record.name == "minitask.worker.pools.watchdog"]

        # said while it still blocks: the task has not returned yet
        (warning,) = wait_until(said, timeout=DEADLINE, message="the blocked loop said")
        release.set()
        assert held.get(timeout=DEADLINE) == "done"
        assert waiting.get(timeout=DEADLINE) == "polite"
    assert warning.startswith(f"task {blocking.name!r} (id {held.id}) has blocked the "
                              f"asyncio pool's event loop for more than 1.0 s")
    assert "await asyncio.to_thread(...)" in warning and "--pool thread " in warning
    worker.stop()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive()


#: The longest step the asyncio producer may take on the loop's thread (CPU time).
STALL_BOUND = 0.020


def test_async_producer_enqueues_10000_without_stalling_the_loop(
        app: Minitask, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    @app.task
    async def job(i: int) -> int:
        return i

    # the deterministic half of the detector: no blocking redis-py I/O on the loop's thread
    blocking_calls: List[str] = []
    loop_threads: List[int] = []
    for name in ("connect", "send_packed_command", "read_response"):
        original = getattr(redis.connection.AbstractConnection, name)

        def spy(self: Any, *args: Any, _original: Any = original, _name: str = name,
                **kwargs: Any) -> Any:
            if threading.get_ident() in loop_threads:
                blocking_calls.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(redis.connection.AbstractConnection, name, spy)

    async def one_round(round_index: int) -> List[float]:
        stalls: List[float] = [0.0, 0.0]  # on the loop's thread; wall clock (shown only)
        done = asyncio.Event()

        async def timer() -> None:  # a loop-blocking detector: how long between its wake-ups
            # does the loop's thread run other code without yielding? Counted in the
            # thread's CPU time, so a loaded machine pausing the whole process does not
            # count (blocking I/O, which uses no CPU, is the spy's to catch).
            while not done.is_set():
                before, wall = time.thread_time(), time.perf_counter()
                await asyncio.sleep(0.001)
                stalls[0] = max(stalls[0], time.thread_time() - before)
                stalls[1] = max(stalls[1], time.perf_counter() - wall - 0.001)

        watcher = asyncio.create_task(timer())
        await asyncio.sleep(0.01)
        loop_threads.append(threading.get_ident())
        base = round_index * 10_000
        handles = [await job.adelay(base + i) for i in range(10_000)]
        assert await handles[-1].astatus() == "queued"
        done.set()
        await watcher
        loop_threads.clear()
        return stalls

    async def main() -> List[List[float]]:
        # the timed half is measured again (at most twice more) when a round's longest
        # step reaches the bound: a shared VM's host can inflate a thread's CPU time
        # now and then, while a loop that really blocks does so in every round
        rounds: List[List[float]] = []
        while len(rounds) < 3 and (not rounds or rounds[-1][0] >= STALL_BOUND):
            rounds.append(await one_round(len(rounds)))
        await app.aclose()
        return rounds

    # the timed half. Collector pauses are the process's, not a blocked loop.
    gc.disable()
    try:
        rounds = asyncio.run(main())
    finally:
        gc.enable()
    for stall, wall in rounds:
        print(f"\nlongest step on the loop {stall * 1000:.1f} ms; latest wake-up "
              f"{wall * 1000:.1f} ms (wall clock, machine load included)")
    assert blocking_calls == []
    client: "redis.Redis[bytes]" = redis_server.client()
    ready = sum(client.llen(f"minitask:{{aiotest:default}}:ready:{p}") for p in range(10))
    client.close()
    assert ready == 10_000 * len(rounds)
    assert rounds[-1][0] < STALL_BOUND, (
        f"the loop stalled {', '.join(f'{s * 1000:.1f}' for s, _ in rounds)} ms "
        f"in {len(rounds)} rounds")
