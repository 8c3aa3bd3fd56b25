"""The async producer and handle side, on ``redis.asyncio``: nothing blocks the loop.

``await task.adelay(...)``, ``await handle.aget()`` and the other ``a*`` twins
send the same Lua script calls, with the same keys, as their blocking
originals: the stores build each call (``enqueue_call``, ``state_call``...),
and this module only carries it over an asyncio connection. Messages are
built and checked by the same code as the blocking path (``Task``,
``Sender.prepare``), before anything is sent.

A ``redis.asyncio`` client belongs to the event loop it first ran on, so the
app keeps one ``AsyncBroker`` per running loop (``Minitask.async_broker()``).
"""
from __future__ import annotations

import asyncio
import hashlib
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import redis
import redis.asyncio

from .broker import Broker
from .errors import BrokerError, ConfigurationError
from .stores.scripts import source
from .transport import MAX_BLOCK_SECONDS, ScriptCall, text

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
    pool = getattr(client, "connection_pool", None)
    twin = _TWINS.get(getattr(getattr(pool, "connection_class", None), "__name__", ""))
    if not isinstance(client, redis.Redis) or pool is None or twin is None or type(
            pool) is not redis.ConnectionPool:
        raise ConfigurationError(
            f"async producers cannot mirror the broker client of {description} (a Redis "
            f"Cluster, Sentinel or custom client): pass a redis.asyncio client as "
            f"Minitask(..., async_broker=...)")
    kwargs = dict(pool.connection_kwargs)
    for blocking_only in ("retry", "redis_connect_func", "credential_provider"):
        kwargs.pop(blocking_only, None)
    return redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(
        connection_class=twin, max_connections=pool.max_connections, **kwargs))


class AsyncBroker:
    """One app's Redis seen from one event loop: the stores' calls, awaited."""

    def __init__(self, broker: Broker, client: AsyncClient) -> None:
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("decode_responses"):
            raise ConfigurationError("minitask needs a Redis client that returns bytes: create "
                                     "the async_broker without decode_responses=True")
        self.broker = broker
        self.client = client
        self.description = broker.description
        self._shas: Dict[str, str] = {}
        self._known_queues: Set[str] = set()

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Turn redis-py's errors into BrokerError saying what failed."""
        try:
            yield
        except (redis.RedisError, OSError) as exc:
            raise BrokerError(f"Redis failed to {what} on {self.description}: {exc}; check "
                              f"that the server is running and reachable") from exc

    async def run(self, call: ScriptCall, what: str) -> Any:
        """Run one script call as the stores built it (EVALSHA; loaded on NOSCRIPT)."""
        name, _, static_keys, tail, dynamic = call
        keys = list(static_keys) + list(tail[:dynamic])
        args = list(tail[dynamic:])
        sha = self._shas.get(name)
        if sha is None:
            sha = self._shas[name] = hashlib.sha1(source(name).encode()).hexdigest()
        with self.errors(what):
            try:
                return await self.client.evalsha(sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                await self.client.script_load(source(name))
                return await self.client.evalsha(sha, len(keys), *keys, *args)

    # -- producing -------------------------------------------------------------------

    async def enqueue(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                      now_ms: int) -> int:
        added = await self.run(self.broker.queues.enqueue_call(queue, entries, now_ms),
                               f"enqueue into queue {queue!r}")
        if queue not in self._known_queues:
            with self.errors("register queues"):
                await self.client.sadd(self.broker.queues.app_keys.queues, queue)
            self._known_queues.add(queue)
        return int(added)

    # -- following -------------------------------------------------------------------

    async def queue_names(self) -> List[str]:
        with self.errors("list queues"):
            names = await self.client.smembers(self.broker.queues.app_keys.queues)
        return sorted(text(name) for name in names)

    async def state(self, queue: str, task_id: str) -> Tuple[str, Optional[bytes]]:
        results = self.broker.results
        return results.state_of(await self.run(results.state_call(queue, task_id),
                                               f"read the state of {task_id}"))

    async def get(self, key: str, what: str) -> Optional[bytes]:
        """One string key's value (a task's progress), or None."""
        with self.errors(what):
            data: Optional[bytes] = await self.client.get(key)
        return data

    async def find_queue(self, task_id: str) -> Optional[str]:
        for queue in await self.queue_names():
            if (await self.state(queue, task_id))[0] != "unknown":
                return queue
        return None

    async def wait_result(self, queue: str, task_id: str, timeout: float) -> Optional[bytes]:
        """Wait until the task's outcome exists (at most ``timeout`` s, capped at 5)."""
        key = self.broker.results.keys(queue).result(task_id)
        seconds = min(max(timeout, 0.002), MAX_BLOCK_SECONDS)
        with self.errors(f"wait for the result of {task_id}"):
            found = await self.client.blmove(key, key, round(seconds, 3), "RIGHT", "LEFT")
        return found if isinstance(found, bytes) else None

    async def cancel(self, queue: str, task_id: str, result_ttl_ms: int) -> bool:
        results = self.broker.results
        with self.errors(f"read message {task_id}"):
            body = await self.client.hget(results.keys(queue).messages, task_id)
        if body is None:
            return False
        return bool(await self.run(results.cancel_call(queue, task_id, body, result_ttl_ms),
                                   f"cancel {task_id}"))

    async def request_cancel(self, queue: str, task_id: str) -> bool:
        return bool(await self.run(self.broker.cancels.request_call(queue, task_id),
                                   f"ask to stop task {task_id}"))

    async def close(self) -> None:
        with self.errors("close the async connections"):
            await self.client.aclose()
            pool = getattr(self.client, "connection_pool", None)
            if pool is not None:  # a pool handed to the client is not closed with it
                await pool.disconnect()


def running_loop(what: str) -> asyncio.AbstractEventLoop:
    """The running event loop; a clear error when called outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise ConfigurationError(f"{what} must be awaited inside a running event loop "
                                 f"(asyncio.run(...)); use its blocking twin "
                                 f"outside one") from None
