"""aget() waits queued for a connection of a full waits' pool, on a real redis-server:
their shared glance reads at most ``GLANCE_KEYS`` keys a time, in turn (1,000 queued
waits cost about 1,000 LINDEX a second, not 10,000, and every result is still seen
within a turn of the keys); a glance that fails as a whole fails no wait (each keeps
its own read and deadline; said once in the log); and after ``aclose()`` the queued
waits raise at once, naming it, and nothing opens a connection again (review 29n).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterator, List, Tuple

import pytest
import redis
import redis.asyncio

from minitask import BrokerError, Minitask, ResultTimeout
from minitask.broker.pools import GLANCE_EVERY
from minitask.stores.aio_clients import GLANCE_KEYS
from tests.support.queued_waits import lindex_calls, run_served, timed_aget, unserved_and_served
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Connections of the broker's pool, so of the waits' pool.
POOL = 4
#: Bounds the whole of each test.
DEADLINE = 90.0


@pytest.fixture
def admin(redis_server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    """One connection of its own, opened before the test's: it opens no other."""
    client = redis_server.client()
    client.flushall()
    yield client
    client.close()


def _app(redis_server: RedisServer, **options: Any) -> Minitask:
    return Minitask("glances", broker=f"{redis_server.url}?max_connections={POOL}",
                    **options)


def test_a_thousand_queued_waits_glance_at_a_bounded_rate_and_see_results_in_turn(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    never, done = unserved_and_served(app)
    queued = [never.delay(n) for n in range(1000)]
    finished = [done.delay(n) for n in range(20)]
    run_served(app, len(finished), DEADLINE)

    async def scenario() -> Tuple[float, List[Tuple[float, Any]], List[Tuple[float, Any]]]:
        start = time.monotonic()
        waiting = [asyncio.ensure_future(timed_aget(h, 6.0, start)) for h in queued]
        await asyncio.sleep(1.0)  # every wait queued by now, the pool's POOL blocking
        before, began = lindex_calls(admin), time.monotonic()
        read = await asyncio.gather(*(timed_aget(h, 10.0, began) for h in finished))
        await asyncio.sleep(max(0.0, began + 2.0 - time.monotonic()))
        rate = (lindex_calls(admin) - before) / (time.monotonic() - began)
        ran_out = await asyncio.gather(*waiting)
        await app.aclose()
        return rate, list(read), list(ran_out)

    try:
        rate, read, ran_out = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    finally:
        app.close()
    most = GLANCE_KEYS / GLANCE_EVERY
    assert rate < 1.3 * most, f"{rate:.0f} LINDEX a second for 1,000 queued waits"
    assert [value for _, value in read] == list(range(20))
    # a turn of 1,020 keys, GLANCE_KEYS a glance: 11 glances, and room for a loaded machine
    latest = max(seconds for seconds, _ in read)
    assert latest < 3.0, f"results already there, queued behind 1,000, read after {latest:.2f} s"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out)
    assert min(seconds for seconds, _ in ran_out) >= 6.0 - 0.05


def test_a_failed_glance_fails_no_queued_wait_and_is_said_once(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    """The sending pool (a plain one, given as async_broker=) held whole while waits
    are queued: every glance fails with "Too many connections"; the waits stay queued
    and read their results once it frees."""
    app = _app(redis_server, async_broker=redis.asyncio.Redis(
        connection_pool=redis.asyncio.ConnectionPool(host="127.0.0.1", port=redis_server.port,
                                                     max_connections=POOL)))
    never, done = unserved_and_served(app)
    blocked = [never.delay(n) for n in range(POOL)]
    later = [done.delay(n) for n in range(3)]

    async def scenario() -> Tuple[List[Tuple[float, Any]], List[Tuple[float, Any]]]:
        start = time.monotonic()
        blocking = [asyncio.ensure_future(timed_aget(h, 2.5, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        queued = [asyncio.ensure_future(timed_aget(h, 10.0, start)) for h in later]
        await asyncio.sleep(0.3)  # queued by now, glancing
        pool = app.async_broker().client.connection_pool
        held: List[Any] = []
        while len(held) < POOL:  # a glance may hold one a moment: taken once it is back
            try:
                held.append(await pool.get_connection())
            except redis.exceptions.MaxConnectionsError:
                await asyncio.sleep(0.01)
        run_served(app, len(later), DEADLINE)  # the results are there; no glance can read them
        await asyncio.sleep(0.6)
        for connection in held:
            await pool.release(connection)
        read = await asyncio.gather(*queued)
        ran_out = await asyncio.gather(*blocking)
        await app.aclose()
        return list(read), list(ran_out)

    with caplog.at_level(logging.WARNING, logger="minitask.stores.aio_clients"):
        try:
            read, ran_out = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
        finally:
            app.close()
    assert [value for _, value in read] == [0, 1, 2], read
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out), ran_out
    said = [r for r in caplog.records if "queued aget() waits failed" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert "Too many connections" in said[0].getMessage(), said[0].getMessage()


def test_queued_waits_end_at_aclose_and_open_no_connection(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    never, _ = unserved_and_served(app)
    blocked, queued = [never.delay(n) for n in range(POOL)], [never.delay(n) for n in range(3)]

    async def scenario() -> Tuple[List[Tuple[float, Any]], int]:
        start = time.monotonic()
        waits = [asyncio.ensure_future(timed_aget(h, 3.0, start)) for h in blocked]
        await asyncio.sleep(0.3)  # the blocking waits hold their connections by now
        waits += [asyncio.ensure_future(timed_aget(h, 1.0, start)) for h in queued]
        await asyncio.sleep(0.3)  # queued by now
        opened = int(admin.info("stats")["total_connections_received"])
        closed_at = time.monotonic()
        await app.aclose()
        ended = [(seconds - (closed_at - start), outcome)
                 for seconds, outcome in await asyncio.gather(*waits)]
        await asyncio.sleep(1.5)  # past every wait's deadline
        return ended, int(admin.info("stats")["total_connections_received"]) - opened

    try:
        ended, opened = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    finally:
        app.close()
    assert opened == 0, f"{opened} connections opened after aclose()"
    assert all(isinstance(outcome, BrokerError) for _, outcome in ended), ended
    for _, outcome in ended[POOL:]:
        assert "aclose()" in str(outcome), str(outcome)
    assert max(seconds for seconds, _ in ended) < 0.5, ended
