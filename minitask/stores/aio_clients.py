"""The async clients minitask makes: a ``redis.asyncio`` twin of the app's blocking
client (``async_client_for``), and the pool of their own that result waits use
(``waits_client_for``). Moved out of ``aio.py``, which uses them, as they were.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import redis
import redis.asyncio

from ..broker.pools import WaitingPool
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
