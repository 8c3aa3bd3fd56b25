"""Pools that wait when full, result waits beside the pool that sends, and the error
of an exhausted pool (issue 29, part 3): no server needed, fakeredis's connections
stand in."""
from __future__ import annotations

import threading
import time
from typing import Any, List

import fakeredis
import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from minitask import ConfigurationError
from minitask.broker.connection import connect
from minitask.broker.connections import _made_uncounted
from minitask.broker.pools import (POOL_WAIT, SHARED_WAITS, PoolExhausted, ResultWaits,
                                   WaitingPool, WaitingSentinelPool, _for_waits)
from minitask.broker.refusals import broker_error


def fake_pool(size: int, timeout: float) -> WaitingPool:
    """A waiting pool of ``size`` fakeredis connections (one fake server)."""
    like = fakeredis.FakeRedis().connection_pool
    return WaitingPool(connection_class=like.connection_class, max_connections=size,
                       timeout=timeout, **like.connection_kwargs)


def test_a_full_pool_hands_over_a_connection_given_back_while_the_caller_waits() -> None:
    pool = fake_pool(1, timeout=POOL_WAIT)
    taken = pool.get_connection()
    got: List[Any] = []
    caller = threading.Thread(target=lambda: got.append(pool.get_connection()))
    caller.start()
    time.sleep(0.1)
    assert caller.is_alive() and got == []  # waiting, not refused
    pool.release(taken)
    caller.join(timeout=10)
    assert got == [taken]
    pool.release(taken)
    pool.disconnect()


def test_a_pool_that_stays_full_raises_pool_exhausted_naming_its_size_and_wait() -> None:
    pool = fake_pool(2, timeout=0.05)
    taken = [pool.get_connection(), pool.get_connection()]
    with pytest.raises(PoolExhausted, match=r"all 2 connections of the client's pool stayed "
                                            r"in use for 0\.05 s"):
        pool.get_connection()
    for connection in taken:
        pool.release(connection)
    pool.disconnect()


@pytest.mark.parametrize("exc", [PoolExhausted("all 100 connections ... for 20 s"),
                                 redis.exceptions.MaxConnectionsError("Too many connections"),
                                 redis.ConnectionError("No connection available.")])
def test_an_exhausted_pool_is_said_as_such_not_as_an_outage(exc: Exception) -> None:
    error = broker_error(exc, "enqueue into queue 'emails'", "redis://h:6379/0")
    assert error.reason == "pool exhausted"
    assert "max_connections" in str(error) and "is Redis running" not in str(error)


def test_a_broker_url_makes_a_waiting_pool_sized_and_timed_by_its_query() -> None:
    pool = connect("redis://127.0.0.1:1/0?max_connections=7&timeout=3").client.connection_pool
    assert isinstance(pool, WaitingPool)
    assert (pool.max_connections, pool.timeout) == (7, 3.0)
    assert "timeout" not in pool.connection_kwargs  # the pool's, not the connections'
    plain = connect("redis://127.0.0.1:1/0").client.connection_pool
    assert isinstance(plain, WaitingPool)
    assert (plain.max_connections, plain.timeout) == (100, POOL_WAIT)


def test_a_sentinel_url_makes_a_waiting_pool_too() -> None:
    pool = connect("redis+sentinel://s1:26380/mymaster?timeout=2").client.connection_pool
    assert isinstance(pool, WaitingSentinelPool) and isinstance(pool, SentinelConnectionPool)
    assert pool.timeout == 2.0


@pytest.mark.parametrize("timeout", ["-1", "nan", "inf"])
def test_a_pool_timeout_that_is_no_number_of_seconds_is_refused(timeout: str) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        connect(f"redis://127.0.0.1:1/0?timeout={timeout}")


def test_a_threads_own_connection_is_made_even_when_the_pool_is_full() -> None:
    """100 threads waiting on the pool's connections made every delay() of another
    thread fail: its own connection was refused by the pool's count."""
    pool = fake_pool(2, timeout=0.05)
    taken = [pool.get_connection(), pool.get_connection()]
    own = _made_uncounted(pool)
    assert own is not None and pool._created_connections == 2  # still the pool's two
    for connection in taken:
        pool.release(connection)
    pool.disconnect()
    own.disconnect()


def test_result_waits_get_a_pool_of_their_own_as_large_as_the_clients() -> None:
    client = redis.Redis.from_url("redis://127.0.0.1:1/0?max_connections=30")
    size, waits = _for_waits(client)
    assert size == 30 and waits is not client
    assert waits.connection_pool is not client.connection_pool
    assert waits.connection_pool.connection_kwargs["port"] == 1
    waits.close()
    client.close()


def test_result_waits_share_a_client_minitask_cannot_mirror_taking_half_at_most() -> None:
    client = fakeredis.FakeRedis(max_connections=40)
    assert _for_waits(client) == (20, client)
    assert _for_waits(fakeredis.FakeRedis())[0] == SHARED_WAITS


def test_a_waiter_past_the_waiting_connections_glances_at_its_result() -> None:
    """Every waiting connection taken by waits for other results: a result already
    there is read at once, not after their waits end."""
    client = fakeredis.FakeRedis(max_connections=2)  # one wait at a time
    waits = ResultWaits(client)
    gate, _ = waits._gate()
    assert gate.acquire(blocking=False)  # the one wait, held by another result's waiter
    client.rpush("ready", b"value")
    assert waits.read("ready", 3.0) == b"value"
    assert waits.read("absent", 0.15) is None  # glanced until the time was up
    gate.release()
    assert waits.read("ready", 0.1) == b"value"  # BLMOVE onto itself: still there
    assert client.lrange("ready", 0, -1) == [b"value"]
