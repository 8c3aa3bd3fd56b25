"""The async clients minitask makes: a ``redis.asyncio`` twin of the app's blocking
client (``async_client_for``), the pool of their own that result waits use
(``waits_client_for``), and the gate that keeps each wait within its deadline
however many queue for that pool (``AsyncResultWaits``).
"""
from __future__ import annotations

import asyncio
from time import monotonic
from typing import Any, Dict, Optional, Tuple

import redis
import redis.asyncio

from ..broker.pools import GLANCE_EVERY, SHARED_WAITS, WaitingPool
from ..errors import ConfigurationError

#: An async client: made by minitask from the app's broker, or given as ``async_broker=``.
AsyncClient = Any

#: The blocking connection classes of redis-py and their asyncio twins, by name.
_TWINS = {"Connection": redis.asyncio.Connection,
          "SSLConnection": redis.asyncio.SSLConnection,
          "UnixDomainSocketConnection": redis.asyncio.UnixDomainSocketConnection}


def async_client_for(client: Any, description: str) -> AsyncClient:
    """A ``redis.asyncio`` client for the server a blocking client talks to: same
    address, credentials, TLS settings and database, its own connections.

    Raises:
        ConfigurationError: the client is a Redis Cluster or Sentinel client, or
            one whose connections minitask cannot mirror; pass ``async_broker=``.
    """
    mirrored = twin_of(client)
    if mirrored is None:
        raise ConfigurationError(
            f"async producers cannot mirror the broker client of {description} (a Redis "
            f"Cluster, Sentinel or custom client): pass a redis.asyncio client as "
            f"Minitask(..., async_broker=...)")
    twin, kwargs = mirrored
    return _client_of(twin, client.connection_pool.max_connections, kwargs)


def twin_of(client: Any) -> Optional[Tuple[Any, Dict[str, Any]]]:
    """The ``redis.asyncio`` connection class and arguments that mirror a plain blocking
    client's connections; None for any other client (a cluster, Sentinel, custom)."""
    pool = getattr(client, "connection_pool", None)
    twin = _TWINS.get(getattr(getattr(pool, "connection_class", None), "__name__", ""))
    if not isinstance(client, redis.Redis) or pool is None or twin is None or type(
            pool) not in (redis.ConnectionPool, WaitingPool):
        return None
    kwargs = dict(pool.connection_kwargs)
    for blocking_only in ("retry", "redis_connect_func", "credential_provider"):
        kwargs.pop(blocking_only, None)
    return twin, kwargs


def _client_of(connection_class: Any, max_connections: int, kwargs: Dict[str, Any]) -> Any:
    """A client whose pool, when all its connections are in use, waits for one to
    come back (redis-py's plain pool refuses the call: "Too many connections")."""
    return redis.asyncio.Redis(connection_pool=redis.asyncio.BlockingConnectionPool(
        connection_class=connection_class, max_connections=max_connections, timeout=None,
        **kwargs))


def waits_client_for(client: AsyncClient) -> AsyncClient:
    """The client ``aget()``'s blocking waits use: a pool of their own beside
    ``client``'s, so that calls waiting for results (each holds its connection for
    up to 5 s) never take the connections enqueues need. A client minitask cannot
    mirror (a cluster, a test double, a custom class) serves waits itself."""
    pool: Any = getattr(client, "connection_pool", None)
    if (type(client) is not redis.asyncio.Redis or getattr(client, "connection", None)
            is not None or type(pool) not in (redis.asyncio.ConnectionPool,
                                              redis.asyncio.BlockingConnectionPool)):
        return client
    return _client_of(pool.connection_class, pool.max_connections,
                      dict(pool.connection_kwargs))


class AsyncResultWaits:
    """``aget()``'s blocking reads, each within its own deadline: the time spent
    queued for a waiting connection counts, as in ``ResultWaits`` (the blocking
    twin's). At most as many block at once as the waits' pool holds; a waiter
    beyond them glances at its result on the sending client every
    ``GLANCE_EVERY`` s until one comes free, and past its deadline returns
    without ever taking one. (A wait used to take a connection whenever one came
    free, then block for its whole timeout: 300 waits of 2 s ended after 6 s.)
    """

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self.waits = waits_client_for(client)
        most = getattr(getattr(self.waits, "connection_pool", None), "max_connections", None)
        if not isinstance(most, int) or isinstance(most, bool):
            most = 2 * SHARED_WAITS
        # waits served by the sending client take at most half its connections
        size = most if self.waits is not client else min(SHARED_WAITS, most // 2)
        self._gate = asyncio.Semaphore(max(1, size))

    async def read(self, key: str, seconds: float) -> Any:
        """The last element of list ``key`` once there is one, read without taking it
        (BLMOVE onto the same list); None when ``seconds`` pass first."""
        deadline = monotonic() + seconds
        held = not self._gate.locked() and await self._gate.acquire()
        while not held:  # every waiting connection is taken: glance, and queue for one
            found = await self._client.lindex(key, -1)
            left = deadline - monotonic()
            if found is not None or left <= 0:
                return found
            held = await self._acquire_within(min(left, GLANCE_EVERY))
        try:
            left = max(deadline - monotonic(), 0.002)  # BLMOVE's 0 waits for ever
            return await self.waits.blmove(key, key, round(left, 3), "RIGHT", "LEFT")
        finally:
            self._gate.release()

    async def _acquire_within(self, seconds: float) -> bool:
        """Whether a waiting connection came free within ``seconds``."""
        try:
            return await asyncio.wait_for(self._gate.acquire(), seconds)
        except asyncio.TimeoutError:
            return False
