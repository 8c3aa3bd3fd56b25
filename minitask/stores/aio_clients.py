"""The async clients minitask makes: a ``redis.asyncio`` twin of the app's blocking
client (``async_client_for``), the pool of their own that result waits use
(``waits_client_for``), and the gate that keeps each wait within its deadline
however many queue for that pool (``AsyncResultWaits``).
"""
from __future__ import annotations

import asyncio
import inspect
from functools import lru_cache
from time import monotonic
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import redis
import redis.asyncio

from ..broker.pools import (GLANCE_EVERY, GLANCE_KEYS, SHARED_WAITS, WaitingPool,
                            glance_failed)
from ..errors import ConfigurationError
from ..printable import own_logger

logger = own_logger(__name__)

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
    mirrored = twin_of(client, description)
    if mirrored is None:
        raise ConfigurationError(
            f"async producers cannot mirror the broker client of {description} (a Redis "
            f"Cluster, Sentinel or custom client): pass a redis.asyncio client as "
            f"Minitask(..., async_broker=...)")
    twin, kwargs = mirrored
    return _client_of(twin, client.connection_pool.max_connections, kwargs)


def check_async_client(client: Any, where: str) -> Any:
    """``async_broker=`` as given: None (mirror the blocking client) or a redis.asyncio
    client (``Redis``, ``RedisCluster``, or a subclass); anything else is refused here,
    naming the option: a string, a number or a blocking client was taken, and the
    first ``adelay()`` failed with a raw AttributeError."""
    if client is None or isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster)):
        return client
    raise ConfigurationError(f"{where}: async_broker must be a redis.asyncio.Redis or "
                             f"redis.asyncio.RedisCluster client (or None, to mirror the "
                             f"broker), got {type(client).__name__} {client!r:.80}")


class Unmirrored(ConfigurationError):
    """A setting of the blocking client that redis-py's asyncio connections lack (OCSP
    validation, a key file's password): a twin without it would connect with weaker
    checks than the user asked for, so none is made."""

    def __init__(self, description: str, settings: List[str]) -> None:
        super().__init__(
            f"async producers cannot mirror the broker client of {description}: this "
            f"redis-py's asyncio connections have no {', '.join(settings)} (set on it), "
            f"and connecting without would weaken what it checks: pass a redis.asyncio "
            f"client as Minitask(..., async_broker=...)")
        self.settings = settings


def twin_of(client: Any, description: str = "this app") -> Optional[Tuple[Any, Dict[str, Any]]]:
    """The ``redis.asyncio`` connection class and arguments that mirror a plain blocking
    client's connections; None for any other client (a cluster, Sentinel, custom).
    Only the arguments the asyncio class takes are passed (redis-py's blocking ones
    have more: OCSP's, say, which its asyncio ones refuse with a TypeError).

    Raises:
        Unmirrored: the client sets one of those others to other than its default.
    """
    pool = getattr(client, "connection_pool", None)
    blocking = getattr(pool, "connection_class", None)
    twin = _TWINS.get(getattr(blocking, "__name__", ""))
    if not isinstance(client, redis.Redis) or pool is None or twin is None or type(
            pool) not in (redis.ConnectionPool, WaitingPool):
        return None
    kwargs = dict(pool.connection_kwargs)
    # objects of the blocking pool's own (its asyncio pool makes its own handler)
    for blocking_only in ("retry", "redis_connect_func", "credential_provider",
                          "maint_notifications_pool_handler"):
        kwargs.pop(blocking_only, None)
    taken = _parameters(twin)
    defaults = _defaults(blocking)
    unmirrored = sorted(name for name, value in kwargs.items() if name not in taken
                        and not _unset(value, defaults.get(name, None)))
    if unmirrored:
        raise Unmirrored(description, unmirrored)
    return twin, {name: value for name, value in kwargs.items() if name in taken}


def in_resp2(connection_class: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` for connections that speak RESP2 whatever the client speaks (redis-py
    8 speaks RESP3 by default): no push message comes between a command and its
    reply on them, nor maintenance notifications (RESP3's)."""
    options = dict(kwargs)
    if "protocol" in _parameters(connection_class):  # (redis-py 4.5's speak RESP2 alone)
        options["protocol"] = 2
        options.pop("maint_notifications_config", None)
    return options


def _unset(value: Any, default: Any) -> bool:
    try:
        return value is default or bool(value == default)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is a setting
        return False


@lru_cache(maxsize=None)
def _parameters(connection_class: Any) -> FrozenSet[str]:
    """The keyword arguments ``connection_class`` takes: those its ``__init__`` names,
    and its bases' while each passes ``**kwargs`` on."""
    return frozenset(_signature(connection_class))


@lru_cache(maxsize=None)
def _defaults(connection_class: Any) -> Dict[str, Any]:
    return {name: parameter.default for name, parameter in _signature(connection_class).items()
            if parameter.default is not inspect.Parameter.empty}


def _signature(connection_class: Any) -> Dict[str, inspect.Parameter]:
    named: Dict[str, inspect.Parameter] = {}
    for base in getattr(connection_class, "__mro__", ()):
        init = vars(base).get("__init__")
        if init is None:
            continue
        passes_on = False
        for name, parameter in inspect.signature(init).parameters.items():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                passes_on = True
            elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL and name != "self":
                named.setdefault(name, parameter)
        if not passes_on:
            break
    return named


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


def cancels_asked() -> int:
    """How many cancels the running task has been asked and not yet taken back."""
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def keep_cancel(before: int) -> None:
    """Raise ``CancelledError`` when the running task was cancelled since it counted
    ``before`` cancels, although the await it made returned: on Python 3.11,
    redis-py's ``asyncio.wait_for`` swallows a cancel that lands as the command
    completes, which would let a wait run on past ``task.cancel()`` or
    ``asyncio.timeout()``."""
    if cancels_asked() > before:
        raise asyncio.CancelledError()


# At most GLANCE_KEYS queued waits' keys are read by one glance, taken in turn (as
# get()'s): 1,000 queued waits cost 1,000 LINDEX a second, not 10,000, and each key
# is read at least every ``ceil(queued / GLANCE_KEYS) * GLANCE_EVERY`` s.

#: How long past its deadline a queued wait may take to read its own key.
LATE_LOOK = 0.1


class AsyncResultWaits:
    """``aget()``'s blocking reads, each within its own deadline: the time spent
    queued for a waiting connection counts, as in ``ResultWaits`` (the blocking
    twin's). At most as many block at once as the waits' pool holds; the waits
    beyond them queue for one and, meanwhile, share one glance: every
    ``GLANCE_EVERY`` s, one pipeline on the sending client reads the results of
    up to ``GLANCE_KEYS`` of them, the keys looked at longest ago first, so a
    result already there is not waited for behind other tasks' waits, and a
    thousand queued waits cost one round trip a glance, not a thousand. A wait
    whose deadline passes while queued returns then, without taking a connection
    (after a look of its own if no glance read its key since it queued). A glance
    that fails as a whole (the sending pool full, a connection lost) is logged
    once and tells no wait anything: each keeps its own read and deadline. Once
    ``stopped()`` (``aclose()``), queued and later waits raise at once and
    nothing opens a connection again.
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
        #: The waits queued for a connection, by the key they wait on (the key looked
        #: at longest ago first): what they saw
        self._queued: Dict[str, List[asyncio.Future[Any]]] = {}
        #: The last glance that read each queued key
        self._looked: Dict[str, int] = {}
        self._glancer: Optional[asyncio.Task[None]] = None
        #: Glances begun
        self._glancing = 0
        self._failing = False  # the last glance failed (said once in the log)
        self._closed = False

    async def read(self, key: str, seconds: float) -> Any:
        """The last element of list ``key`` once there is one, read without taking it
        (BLMOVE onto the same list); None when ``seconds`` pass first."""
        deadline, before = monotonic() + seconds, cancels_asked()
        self._check_open()
        if self._gate.locked():  # every waiting connection is taken: queue for one
            seen = asyncio.get_running_loop().create_future()
            acquiring = asyncio.ensure_future(self._gate.acquire())
            self._queued.setdefault(key, []).append(seen)
            joined = self._glancing
            if self._glancer is None:
                self._glancer = asyncio.ensure_future(self._glance())
            try:
                await asyncio.wait((seen, acquiring), timeout=max(deadline - monotonic(), 0),
                                   return_when=asyncio.FIRST_COMPLETED)
                keep_cancel(before)
            except BaseException:  # cancelled: neither the turn nor a glance is its
                self._drop(acquiring)
                if seen.done() and not seen.cancelled():
                    seen.exception()  # read, so that asyncio does not report it
                raise
            finally:
                looked = self._looked.get(key, -1) > joined
                self._unqueue(key, seen)
            if seen.done() or not acquiring.done() or self._closed:
                self._drop(acquiring)
                if seen.done():
                    return seen.result()
                self._check_open()
                # its key read by a glance since it queued, or once now (timeout=0, say)
                if looked:
                    return None
                found = await self._late_look(key, deadline)
                keep_cancel(before)
                return found
        else:
            await self._gate.acquire()
        try:
            keep_cancel(before)
            self._check_open()
            left = max(deadline - monotonic(), 0.002)  # BLMOVE's 0 waits for ever
            found = await self.waits.blmove(key, key, round(left, 3), "RIGHT", "LEFT")
            keep_cancel(before)
            return found
        finally:
            self._gate.release()

    async def _late_look(self, key: str, deadline: float) -> Any:
        """A queued wait's own read of its key at its deadline, done by ``LATE_LOOK``
        s past it: a thousand waits running out together queue these reads for the
        sending connections; one not done by then reads as no result (ran out)."""
        left = deadline + LATE_LOOK - monotonic()
        if left <= 0:
            return None
        bound = asyncio.timeout(left)
        try:
            async with bound:
                return await self._client.lindex(key, -1)
        except TimeoutError:
            if not bound.expired():
                raise
            return None

    def _check_open(self) -> None:
        if self._closed:
            raise _closed()

    def _drop(self, acquiring: asyncio.Future[Any]) -> None:
        """Give up a queued wait's turn: the connection back if it was had meanwhile."""
        if not acquiring.done():
            acquiring.cancel()  # a turn granted meanwhile goes to the next in line
        elif not acquiring.cancelled() and acquiring.exception() is None:
            self._gate.release()

    def _unqueue(self, key: str, seen: asyncio.Future[Any]) -> None:
        waiting = self._queued.get(key, [])
        if seen in waiting:
            waiting.remove(seen)
        if not waiting:
            self._queued.pop(key, None)
            self._looked.pop(key, None)

    async def _glance(self) -> None:
        """Read up to ``GLANCE_KEYS`` queued waits' results in one pipeline, each
        ``GLANCE_EVERY`` s, as long as any wait is queued; a wait whose result is
        there (or whose key refused the read) is told."""
        try:
            while self._queued:
                keys = list(self._queued)[:GLANCE_KEYS]
                queued = sum(len(waiting) for waiting in self._queued.values())  # as it begins
                self._glancing += 1
                glance = self._glancing
                try:
                    async with self._client.pipeline(transaction=False) as pipe:
                        for key in keys:
                            pipe.lindex(key, -1)
                        replies = list(await pipe.execute(raise_on_error=False))
                except Exception as exc:  # noqa: BLE001 - no wait is told: each reads itself
                    self._failed(exc, queued, len(keys))
                else:
                    self._failing = False
                    self._tell(keys, replies, glance)
                await asyncio.sleep(GLANCE_EVERY)
        finally:
            if self._glancer is asyncio.current_task():
                self._glancer = None

    def _tell(self, keys: List[str], replies: List[Any], glance: int) -> None:
        """Hand a glance's replies to the waits queued on each key; the keys read go
        to the back of the line."""
        for key, reply in zip(keys, replies):
            waiting = self._queued.pop(key, None)
            if waiting is None:
                continue
            self._queued[key] = waiting
            self._looked[key] = glance
            for seen in waiting:
                if reply is None or seen.done():
                    continue
                if isinstance(reply, BaseException):
                    seen.set_exception(reply)
                else:
                    seen.set_result(reply)

    def _failed(self, exc: Exception, queued: int, keys: int) -> None:
        if not self._failing:
            logger.warning("%s", glance_failed("aget()", queued, keys, exc))
        self._failing = True

    def stopped(self) -> AsyncClient:
        """Stop glancing and end the queued waits (each raises, naming ``aclose()``);
        the waits' client, for the owner of this to close."""
        self._closed = True
        glancer, self._glancer = self._glancer, None
        if glancer is not None:
            glancer.cancel()
        for waiting in self._queued.values():
            for seen in waiting:
                if not seen.done():
                    seen.set_exception(_closed())
        return self.waits


def _closed() -> redis.ConnectionError:
    """What a wait raises once its loop's async connections were closed (the
    caller's ``errors()`` names the task)."""
    return redis.ConnectionError("the async connections of this event loop were closed "
                                 "(app.aclose()) while the wait was under way; nothing was "
                                 "read")
