"""More result waits at once than the waits' pool holds, on a real redis-server: each
``aget(timeout=T)`` / ``get(timeout=T)`` raises at its own deadline (the time spent
queued for a waiting connection counts), and a result already there is read at once,
not after the waits ahead of it (issue 29, part 3).

Before the fix an ``aget()`` took a connection whenever one came free, then blocked
for its whole timeout: 48 waits of 2 s on a pool of 8 ended after up to 12 s.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator, List, Tuple

import pytest

from minitask import DecodeError, Minitask, ResultTimeout
from tests.support.queued_waits import run_served, timed_aget, timed_gets, unserved_and_served
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Connections of the broker's pool, so of the waits' pool.
POOL = 8
#: Waits at once: six times the pool, so that waits taken in turns end by 6 * T.
WAITS = 6 * POOL
#: Each wait's timeout.
T = 2.0
#: How late a wait may raise on a loaded 2-core machine: well below another T.
MARGIN = 1.2
#: Bounds the whole of each test.
DEADLINE = 60.0


@pytest.fixture
def app(redis_server: RedisServer) -> Iterator[Minitask]:
    client = redis_server.client()
    client.flushall()
    client.close()
    made = Minitask("fullwaits", broker=f"{redis_server.url}?max_connections={POOL}")
    yield made
    made.close()


def _never_run(app: Minitask, count: int) -> List[Any]:
    """Handles of tasks sent to a queue no worker serves: their waits run out."""
    never, _ = unserved_and_served(app)
    return [never.delay(n) for n in range(count)]


def _done(app: Minitask, count: int) -> List[Any]:
    """Handles of tasks already run, their results kept."""
    _, done = unserved_and_served(app)
    handles = [done.delay(n) for n in range(count)]
    run_served(app, count, DEADLINE)
    return handles


def test_every_aget_raises_at_its_own_deadline(app: Minitask) -> None:
    handles = _never_run(app, WAITS)

    async def scenario() -> List[Tuple[float, Any]]:
        start = time.monotonic()
        ended = await asyncio.gather(*(timed_aget(h, T, start) for h in handles))
        await app.aclose()
        return list(ended)

    ended = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ended), ended
    latest = max(seconds for seconds, _ in ended)
    assert T - 0.05 <= min(seconds for seconds, _ in ended)
    assert latest < T + MARGIN, f"the last of {WAITS} waits of {T} s raised after {latest:.2f} s"


def test_an_aget_queued_for_a_connection_reads_a_result_already_there(app: Minitask) -> None:
    """POOL waits on tasks that never end hold every waiting connection for 4 s; the
    waits for finished tasks queued behind them return at once."""
    blocked, finished = _never_run(app, POOL), _done(app, 3 * POOL)

    async def scenario() -> Tuple[List[Tuple[float, Any]], List[Tuple[float, Any]]]:
        start = time.monotonic()
        blocking = [asyncio.ensure_future(timed_aget(h, 4.0, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        start = time.monotonic()
        read = await asyncio.gather(*(timed_aget(h, 10.0, start) for h in finished))
        ran_out = await asyncio.gather(*blocking)
        await app.aclose()
        return list(read), list(ran_out)

    read, ran_out = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert [value for _, value in read] == list(range(3 * POOL))
    latest = max(seconds for seconds, _ in read)
    assert latest < 2.0, f"results already there were read after {latest:.2f} s"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out)


def test_every_get_in_threads_raises_at_its_own_deadline(app: Minitask) -> None:
    """The blocking twin held already (its ResultWaits); kept as its guard."""
    handles = _never_run(app, WAITS)
    ended: List[Tuple[float, Any]] = []
    start = time.monotonic()
    threads = timed_gets(handles, T, ended)
    for thread in threads:
        thread.join(max(0.0, start + DEADLINE - time.monotonic()))
    assert len(ended) == WAITS, "waits never ended"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ended), ended
    latest = max(seconds for seconds, _ in ended)
    assert latest < T + MARGIN, f"the last of {WAITS} waits of {T} s raised after {latest:.2f} s"


def test_an_aget_of_timeout_0_looks_once_though_every_connection_is_taken(
        app: Minitask) -> None:
    blocked, finished = _never_run(app, POOL), _done(app, 1)

    async def scenario() -> Tuple[Tuple[float, Any], List[Tuple[float, Any]]]:
        start = time.monotonic()
        blocking = [asyncio.ensure_future(timed_aget(h, 4.0, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        looked = await timed_aget(finished[0], 0, time.monotonic())
        ran_out = await asyncio.gather(*blocking)
        await app.aclose()
        return looked, list(ran_out)

    (seconds, value), ran_out = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert value == 0
    assert seconds < 2.0, f"timeout=0 returned after {seconds:.2f} s"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out)


def test_aget_calls_cancelled_while_queued_give_back_every_connection(
        app: Minitask) -> None:
    """Waits cancelled while queued (asyncio.wait_for around them) leave the waits'
    pool whole: later waits, twice as many as it holds, all read their results."""
    blocked, never, finished = _never_run(app, POOL), _never_run(app, 3 * POOL), \
        _done(app, 2 * POOL)

    async def scenario() -> Tuple[List[Any], List[Tuple[float, Any]], int]:
        start = time.monotonic()
        blocking = [asyncio.ensure_future(timed_aget(h, 1.5, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        cancelled = await asyncio.gather(
            *(asyncio.wait_for(h.aget(timeout=30), 0.2 + 0.01 * n)
              for n, h in enumerate(never)), return_exceptions=True)
        await asyncio.gather(*blocking)
        start = time.monotonic()
        read = await asyncio.gather(*(timed_aget(h, 10.0, start) for h in finished))
        free = app.async_broker()._waits._gate._value
        await app.aclose()
        return list(cancelled), list(read), free

    cancelled, read, free = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert all(isinstance(outcome, asyncio.TimeoutError) for outcome in cancelled)
    assert [value for _, value in read] == list(range(2 * POOL))
    assert free == POOL


def test_a_queued_aget_on_a_planted_result_key_names_it_at_once(
        app: Minitask, redis_server: RedisServer) -> None:
    """The shared glance's refusal (a key of another type) reaches the wait it is
    for, worded as an unqueued wait's."""
    blocked, planted = _never_run(app, POOL), _never_run(app, 1)[0]
    key = app.broker.results.keys("unserved").result(planted.id)
    client = redis_server.client()
    client.set(key, "planted")
    client.close()

    async def scenario() -> Tuple[Tuple[float, Any], List[Tuple[float, Any]]]:
        start = time.monotonic()
        blocking = [asyncio.ensure_future(timed_aget(h, 4.0, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        refused = await timed_aget(planted, 10.0, time.monotonic())
        ran_out = await asyncio.gather(*blocking)
        await app.aclose()
        return refused, list(ran_out)

    (seconds, refused), ran_out = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert isinstance(refused, DecodeError), refused
    assert key in str(refused) and "holds a string" in str(refused), str(refused)
    assert seconds < 2.0, f"the refusal came after {seconds:.2f} s"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out)
