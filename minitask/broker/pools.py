"""Connection pools that wait when full, and result waits beside the pool that sends.

redis-py's plain pool refuses a call the moment all its connections are in use
("Too many connections"), and minitask turned that into "is Redis running?".
What filled it were the blocking reads of ``get()`` and ``join()``, each holding
a connection for up to 5 s: 100 threads waiting made every send fail. So:

* a pool minitask makes (from a broker URL) waits for a connection to come
  back, up to its ``timeout`` (``POOL_WAIT`` unless the URL's ``?timeout=``
  says otherwise), then fails saying the pool is exhausted and how to enlarge it;
* result waits run on a pool of their own (``ResultWaits``), so that any number
  of them never takes a connection a send needs. At most as many block at once
  as that pool holds; the waiters beyond them share one glance at their results
  on the sending pool (one pipeline of reads that return at once, of up to
  ``GLANCE_KEYS`` keys, every ``GLANCE_EVERY`` seconds, ``_Glances``) until a
  waiting connection comes free, so a result already there is never waited for
  behind other tasks' waits, and a thousand waiting threads cost what a thousand
  ``aget()`` calls do. BLMOVE reads one key, so waits on different results
  cannot share one blocked connection: a bounded pool is the sharing Redis allows.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import redis
from redis.exceptions import MaxConnectionsError
from redis.sentinel import SentinelConnectionPool

from ..printable import own_logger
from .connections import current_pid

logger = own_logger(__name__)

#: Seconds a call waits for a connection of a full pool minitask made (the broker
#: URL's ``?timeout=`` overrides it): redis-py's BlockingConnectionPool's default.
POOL_WAIT = 20.0

#: The longest a caller of a full pool sleeps between looks, should the notice of a
#: connection coming back slip past it.
_RECHECK = 0.05

#: Seconds between a waiter's glances at its result while every waiting connection
#: is taken.
GLANCE_EVERY = 0.1

#: At most this many queued waits' keys are read by one glance, taken in turn: 1,000
#: waiting threads cost 1,000 LINDEX a second, not 10,000 (as ``aget()``'s glance).
GLANCE_KEYS = 100

#: At most this many waits at once on a client whose pool they must share (a
#: cluster, Sentinel or custom client), and never more than half its connections.
SHARED_WAITS = 50


class PoolExhausted(MaxConnectionsError):
    """Every connection of a pool stayed in use for the pool's whole ``timeout``."""


class _WaitsWhenFull:
    """A redis-py pool (mixed in before it) whose full state makes a caller wait.

    Args:
        timeout: seconds a caller waits for a connection to come back before
            ``PoolExhausted``; a finite number, 0 or more.
    """

    max_connections: int

    def __init__(self, *args: Any, timeout: Optional[float] = POOL_WAIT,
                 **kwargs: Any) -> None:
        wait = POOL_WAIT if timeout is None else timeout
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) \
                or not math.isfinite(wait) or wait < 0:
            raise ValueError(f"the pool's timeout must be a number of seconds, 0 or more, "
                             f"not {timeout!r}")
        self.timeout = float(wait)
        super().__init__(*args, **kwargs)
        # on the pool's own lock: minitask holds it across a fork (connections.forking)
        self._freed = threading.Condition(self._lock)  # type: ignore[attr-defined]

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        """A connection; when all are in use, one that comes back within ``timeout``."""
        deadline: Optional[float] = None
        while True:
            try:
                return super().get_connection(*args, **kwargs)  # type: ignore[misc]
            except MaxConnectionsError:
                now = time.monotonic()
                deadline = now + self.timeout if deadline is None else deadline
                if now >= deadline:
                    raise PoolExhausted(
                        f"all {self.max_connections} connections of the client's pool "
                        f"stayed in use for {self.timeout:g} s") from None
                with self._freed:
                    self._freed.wait(min(deadline - now, _RECHECK))

    def release(self, connection: Any) -> None:
        super().release(connection)  # type: ignore[misc]
        with self._freed:
            self._freed.notify()


class WaitingPool(_WaitsWhenFull, redis.ConnectionPool):
    """redis-py's ConnectionPool, but a full one waits (see ``_WaitsWhenFull``)."""


class WaitingSentinelPool(_WaitsWhenFull, SentinelConnectionPool):
    """The pool of a Sentinel service's primary, waiting when full."""


def waiting_client(url: str, **options: Any) -> redis.Redis:
    """``redis.Redis.from_url(url, **options)``, on a pool that waits when full."""
    client = redis.Redis(connection_pool=WaitingPool.from_url(url, **options))
    client.auto_close_connection_pool = True
    return client


#: What a pool puts in its connections' settings about itself: not for a mirror's.
_POOLS_OWN = ("maint_notifications_pool_handler", "oss_cluster_maint_notifications_handler",
              "timeout")

#: Pools whose connections a mirror can make: the same class, address and settings.
_MIRRORED = (redis.ConnectionPool, redis.BlockingConnectionPool, WaitingPool)


def _for_waits(client: Any) -> Tuple[int, Any]:
    """How many result waits may block at once, and the client they block on: a
    mirror of ``client`` with a pool of its own, as large as ``client``'s, or
    ``client`` itself (a cluster, Sentinel or custom client), then with at most
    half its connections for waits."""
    pool: Any = getattr(client, "connection_pool", None)
    if (type(client) is redis.Redis and getattr(client, "connection", None) is None
            and type(pool) in _MIRRORED):
        size = pool.max_connections
        kwargs = {key: value for key, value in pool.connection_kwargs.items()
                  if key not in _POOLS_OWN}
        mirror = redis.Redis(connection_pool=WaitingPool(
            connection_class=pool.connection_class, max_connections=size, **kwargs))
        mirror.auto_close_connection_pool = True
        return size, mirror
    most = getattr(pool, "max_connections", 2 * SHARED_WAITS)
    return max(1, min(SHARED_WAITS, most // 2)), client


class _Seen:
    """What the glances told one queued wait: whether one read its key since it
    queued (``looked``), and the result or refusal found there (``found``)."""

    __slots__ = ("looked", "found")

    def __init__(self) -> None:
        self.looked = False
        self.found: Any = None


class _Glances:
    """The one look at queued waits' results that the threads of a process share.

    A queued thread whose turn comes (none glanced in the last ``GLANCE_EVERY``
    s, none glancing) reads the keys of up to ``GLANCE_KEYS`` queued waits, the
    keys looked at longest ago first, in one pipeline on the sending client, and
    tells each wait what was there: no thread of its own, no wait that glances
    on its own. A glance that fails as a whole (the sending pool full, a lost
    connection) tells no wait anything and is logged once: each wait reads its
    own result at its deadline.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The waits queued on each key (the key looked at longest ago first)
        self._queued: Dict[str, List[_Seen]] = {}
        self._next = 0.0  # when the next glance may begin
        self._glancing = False
        self._failing = False  # the last glance failed (said once in the log)

    def join(self, key: str) -> _Seen:
        seen = _Seen()
        with self._lock:
            self._queued.setdefault(key, []).append(seen)
        return seen

    def leave(self, key: str, seen: _Seen) -> None:
        with self._lock:
            waiting = self._queued.get(key, [])
            if seen in waiting:
                waiting.remove(seen)
            if not waiting:
                self._queued.pop(key, None)

    def glance_if_due(self, client: Any) -> None:
        """Glance now if it is this process's turn to, on ``client``."""
        with self._lock:
            now = time.monotonic()
            if self._glancing or now < self._next or not self._queued:
                return
            self._glancing, self._next = True, now + GLANCE_EVERY
            keys = list(self._queued)[:GLANCE_KEYS]
        replies: Optional[List[Any]] = None
        try:
            with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.lindex(key, -1)
                replies = list(pipe.execute(raise_on_error=False))
        except Exception as exc:  # noqa: BLE001 - no wait is told: each reads itself
            self._failed(exc)
        finally:
            with self._lock:
                self._glancing = False
                if replies is not None:
                    self._failing = False
                    self._tell(keys, replies)

    def _tell(self, keys: List[str], replies: List[Any]) -> None:
        """Hand a glance's replies to the waits queued on each key (under the lock);
        the keys read go to the back of the line."""
        for key, reply in zip(keys, replies):
            waiting = self._queued.pop(key, None)
            if waiting is None:
                continue
            self._queued[key] = waiting
            for seen in waiting:
                seen.looked = True
                if reply is not None and seen.found is None:
                    seen.found = reply

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            said, self._failing = self._failing, True
            queued = sum(len(waiting) for waiting in self._queued.values())
        if not said:
            logger.warning("the shared look at the results of %d queued get() waits failed "
                           "(%s: %s); each wait reads its own result at its deadline or "
                           "turn (said once until a look works again)",
                           queued, type(exc).__name__, exc)


class ResultWaits:
    """Blocking reads of kept results (``get()``, ``join()``) for one client."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        # made on first use in each process: a forked child must not share the
        # mirror's sockets, nor a gate whose permits its parent's threads held,
        # nor the glances of its parent's queued threads
        self._made: Optional[Tuple[int, threading.BoundedSemaphore, Any, _Glances]] = None

    def _made_here(self) -> Tuple[int, threading.BoundedSemaphore, Any, _Glances]:
        made, pid = self._made, current_pid()
        if made is None or made[0] != pid:
            with self._lock:
                made = self._made
                if made is None or made[0] != pid:
                    size, waiting = _for_waits(self._client)
                    made = self._made = (pid, threading.BoundedSemaphore(size), waiting,
                                         _Glances())
        return made

    def _gate(self) -> Tuple[threading.BoundedSemaphore, Any]:
        made = self._made_here()
        return made[1], made[2]

    def read(self, key: str, seconds: float) -> Any:
        """The last element of list ``key`` once there is one, read without taking it
        (BLMOVE onto the same list); None when ``seconds`` pass first. A wait that
        finds every waiting connection taken queues for one and shares the glances
        (``_Glances``); its deadline passed, it returns without one (after a look of
        its own if no glance read its key since it queued)."""
        _, gate, client, glances = self._made_here()
        deadline = time.monotonic() + seconds
        if not gate.acquire(blocking=False):
            seen = glances.join(key)
            try:
                held = self._queued(gate, glances, seen, deadline)
            finally:
                glances.leave(key, seen)
            if not held:
                found = seen.found
                if isinstance(found, Exception):
                    raise found
                if found is not None or seen.looked:
                    return found
                return self._client.lindex(key, -1)  # timeout=0, say: one look
        try:
            left = max(deadline - time.monotonic(), 0.002)  # BLMOVE's 0 waits for ever
            return client.blmove(key, key, round(left, 3), "RIGHT", "LEFT")
        finally:
            gate.release()

    def _queued(self, gate: threading.BoundedSemaphore, glances: _Glances, seen: _Seen,
                deadline: float) -> bool:
        """Wait queued for a waiting connection (True once held) until a glance finds
        the result or the deadline passes (False)."""
        while True:
            glances.glance_if_due(self._client)
            left = deadline - time.monotonic()
            if seen.found is not None or left <= 0:
                return False
            if gate.acquire(timeout=min(left, GLANCE_EVERY)):
                return True

    def close(self) -> None:
        """Close the waits' own connections; the next wait opens new ones."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None and made[2] is not self._client:
            made[2].close()
