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
  ``GLANCE_KEYS`` keys, every ``GLANCE_EVERY`` seconds, ``_Turns``) until a
  waiting connection comes free, so a result already there is never waited for
  behind other tasks' waits, and a thousand waiting threads cost what a thousand
  ``aget()`` calls do. BLMOVE reads one key, so waits on different results
  cannot share one blocked connection: a bounded pool is the sharing Redis allows.
"""
from __future__ import annotations

import itertools
import math
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

import redis
from redis.exceptions import MaxConnectionsError
from redis.sentinel import SentinelConnectionPool

from ..printable import own_logger
from .connections import current_pid

logger = own_logger(__name__)

#: Seconds a call waits for a connection of a full pool minitask made (the broker
#: URL's ``?timeout=`` overrides it): redis-py's BlockingConnectionPool's default.
POOL_WAIT = 20.0

#: The longest a caller of a full pool sleeps between looks: a safety net only (a
#: release is never missed, ``_WaitsWhenFull``), so hundreds of waiting threads do
#: not wake each other and the holders of connections for the GIL.
_RECHECK = 1.0

#: Seconds between a waiter's glances at its result while every waiting connection
#: is taken.
GLANCE_EVERY = 0.1

#: At most this many queued waits' keys are read by one glance, taken in turn: 1,000
#: waiting threads cost 1,000 LINDEX a second, not 10,000 (as ``aget()``'s glance).
GLANCE_KEYS = 100

#: How long past its deadline a queued wait no glance looked for may wait for a
#: connection of the sending pool, for its one look of its own.
LAST_LOOK = 0.1

#: At most this many waits at once on a client whose pool they must share (a
#: cluster, Sentinel or custom client), and never more than half its connections.
SHARED_WAITS = 50


class PoolExhausted(MaxConnectionsError):
    """Every connection of a pool stayed in use for the pool's whole ``timeout``, or
    until the caller's own cut (``pool_waits_cut_at``)."""


#: A thread's own bound on its waits for a connection (``pool_waits_cut_at``).
_cut = threading.local()


@contextmanager
def pool_waits_cut_at(deadline: float) -> Iterator[None]:
    """Within it, this thread waits for a connection of a full pool minitask made
    until ``deadline`` (``time.monotonic()``) at most, then gets ``PoolExhausted``:
    for a look that must not outlast its caller's deadline (get()'s timeout message)."""
    before = getattr(_cut, "at", None)
    _cut.at = deadline if before is None else min(before, deadline)
    try:
        yield
    finally:
        _cut.at = before


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
        self._released = 0  # connections given back so far (under ``_freed``)

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        # in a forked child: none of the parent's sleepers left in it to take a notify
        self._freed = threading.Condition(self._lock)  # type: ignore[attr-defined]

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        """A connection; when all are in use, one that comes back within ``timeout``.

        A caller sleeps until a release (``release`` counts them): it reads the
        count before it tries, so one that comes between its try and its sleep
        is not slept through.
        """
        deadline: Optional[float] = None
        while True:
            released = self._released
            try:
                return super().get_connection(*args, **kwargs)  # type: ignore[misc]
            except MaxConnectionsError:
                now = time.monotonic()
                if deadline is None:
                    deadline, waited = now + self.timeout, f"for {self.timeout:g} s"
                    cut = getattr(_cut, "at", None)
                    if cut is not None and cut < deadline:
                        deadline, waited = cut, "until the caller's own deadline"
                if now >= deadline:
                    raise PoolExhausted(
                        f"all {self.max_connections} connections of the client's pool "
                        f"stayed in use {waited}") from None
                with self._freed:
                    if self._released == released:
                        self._freed.wait(min(deadline - now, _RECHECK))

    def release(self, connection: Any) -> None:
        super().release(connection)  # type: ignore[misc]
        with self._freed:
            self._released += 1
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
    """One wait queued for a waiting connection: its ``key``, when it queued
    (``joined``), when the last glance that read its key since then began
    (``looked``), the result or refusal found there (``found``), whether a
    connection was handed to it (``granted``), and the event that wakes it when
    any of these change or it becomes the glancer."""

    __slots__ = ("key", "joined", "looked", "found", "granted", "wake")

    def __init__(self, key: str) -> None:
        self.key = key
        self.joined = time.monotonic()
        self.looked = -math.inf
        self.granted = False
        self.found: Any = None
        self.wake = threading.Event()


class _Turns:
    """The waiting connections of one process, and the waits queued for them.

    ``acquire``/``release`` count the free waiting connections; a wait that finds
    none queues (``join``), and a connection given back goes to the wait queued
    longest, woken by its event. The queued waits sleep until something concerns
    them: only one of them, the glancer (the oldest), wakes every ``GLANCE_EVERY``
    s to read the keys of up to ``GLANCE_KEYS`` queued waits in one pipeline on the
    sending client, and wakes each wait whose result it found. Keys never read come
    first (half a glance at most, so that new waits cannot starve old ones), then
    those read longest ago. A thousand waiting threads cost one thread's wake-ups
    and what a thousand ``aget()`` calls do. A glance that fails as a whole (a lost
    connection) tells no wait anything and is logged once: each wait reads its own
    result at its deadline.
    """

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._free = size
        self._queue: Dict[_Seen, None] = {}  # in the order they came
        #: The waits queued on each key: keys no glance read yet, in the order they
        #: came (``_fresh``), and keys read, the one read longest ago first (``_read``)
        self._fresh: Dict[str, List[_Seen]] = {}
        self._read: Dict[str, List[_Seen]] = {}
        self._next = 0.0  # when the next glance may begin
        self._failing = False  # the last glance failed (said once in the log)

    def acquire(self, blocking: bool = False) -> bool:
        """Take a free waiting connection, if one is free and no wait is queued."""
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                return True
            return False

    def release(self) -> None:
        """Give a waiting connection back: to the wait queued longest, if any."""
        with self._lock:
            self._give_back()

    def abandon(self, seen: _Seen) -> None:
        """A queued wait that ends by an exception leaves the queue, and gives back
        the connection handed to it meanwhile."""
        with self._lock:
            if seen.granted:
                seen.granted = False
                self._give_back()
            self._drop(seen)

    def _give_back(self) -> None:
        if not self._queue:
            self._free += 1
            return
        seen = next(iter(self._queue))
        seen.granted = True  # before it leaves the queue: an interrupt loses no turn
        self._drop(seen)
        seen.wake.set()

    def join(self, key: str) -> Optional[_Seen]:
        """A free waiting connection (None), or a place in the queue for one."""
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                return None
            seen = _Seen(key)
            self._queue[seen] = None
            waiting = self._read.get(key)
            if waiting is None:
                waiting = self._fresh.setdefault(key, [])
            waiting.append(seen)
            return seen

    def wait(self, seen: _Seen, deadline: float, client: Any) -> bool:
        """Sleep queued until a connection is handed over (True: the caller holds it
        and releases it), or a glance finds the result, or the deadline (False)."""
        while True:
            seen.wake.clear()
            with self._lock:
                if seen.granted or seen.found is not None or seen not in self._queue:
                    return seen.granted
                now = time.monotonic()
                if now >= deadline:
                    self._drop(seen)
                    return False
                glancer = next(iter(self._queue)) is seen
                due = glancer and now >= self._next
                if due:
                    self._next = now + GLANCE_EVERY
                    keys = self._due_keys()
                    queued = len(self._queue)  # as the glance begins: this wait among them
            if due:
                self._glance(keys, queued, client, deadline)
                continue
            sleep = min(deadline, self._next) if glancer else deadline
            seen.wake.wait(max(0.0, sleep - time.monotonic()))

    def _due_keys(self) -> List[str]:
        """The keys the next glance reads (under the lock)."""
        fresh = list(itertools.islice(self._fresh, GLANCE_KEYS // 2))
        read = list(itertools.islice(self._read, GLANCE_KEYS - len(fresh)))
        more = itertools.islice(self._fresh, len(fresh), GLANCE_KEYS - len(read))
        return fresh + read + list(more)

    def _drop(self, seen: _Seen) -> None:
        """Take ``seen`` out of the queue (under the lock), waking the next glancer."""
        if seen not in self._queue:
            return
        was_glancer = next(iter(self._queue)) is seen
        del self._queue[seen]
        for keys in (self._fresh, self._read):
            waiting = keys.get(seen.key)
            if waiting is not None:
                if seen in waiting:
                    waiting.remove(seen)
                if not waiting:
                    del keys[seen.key]
        if was_glancer and self._queue:
            next(iter(self._queue)).wake.set()

    def _glance(self, keys: List[str], queued: int, client: Any, deadline: float) -> None:
        """Read ``keys`` (of the ``queued`` waits) on ``client``, waiting for a
        connection until the glancer's own ``deadline`` at most."""
        began = time.monotonic()
        try:
            with pool_waits_cut_at(deadline), client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.lindex(key, -1)
                replies = list(pipe.execute(raise_on_error=False))
        except Exception as exc:  # noqa: BLE001 - no wait is told: each reads itself
            if isinstance(exc, PoolExhausted) and time.monotonic() >= deadline:
                return  # the sending pool stayed full until the glancer's own deadline
            self._failed(exc, queued, len(keys))
            return
        with self._lock:
            self._failing = False
            self._tell(keys, replies, began)

    def _tell(self, keys: List[str], replies: List[Any], began: float) -> None:
        """Hand a glance begun at ``began`` its replies for the waits queued on each
        key (under the lock), waking those it found a result for; a wait that queued
        after it began is not counted as looked for. The keys read go to the back."""
        for key, reply in zip(keys, replies):
            waiting = self._fresh.pop(key, None) or self._read.pop(key, None)
            if waiting is None:
                continue
            self._read[key] = waiting
            for seen in list(waiting):
                if seen.joined <= began:
                    seen.looked = began
                if reply is not None and seen.found is None:
                    seen.found = reply
                    self._drop(seen)
                    seen.wake.set()

    def _failed(self, exc: Exception, queued: int, keys: int) -> None:
        with self._lock:
            said, self._failing = self._failing, True
        if not said:
            logger.warning("%s", glance_failed("get()", queued, keys, exc))


def glance_failed(waits: str, queued: int, keys: int, exc: BaseException) -> str:
    """What a failed shared glance says: the ``waits`` (``get()``, ``aget()``) queued
    as it began, and the keys it read, counted then; not counted after it (the waits
    may all have left meanwhile: the glancer handed a connection, their deadlines
    passed), so never "0 queued waits" for a look that had some to do."""
    read = f"{keys:,} key{'s' if keys != 1 else ''} in one pipeline" if keys > 0 else "no key"
    if queued > 0:
        read += f", for the {queued:,} wait{'s' if queued != 1 else ''} queued as it began"
    return (f"the shared look at the results of queued {waits} waits failed "
            f"({type(exc).__name__}: {exc}; it read {read}); each wait reads its own result "
            f"at its deadline or turn (said once until a look works again)")


class ResultWaits:
    """Blocking reads of kept results (``get()``, ``join()``) for one client."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        # made on first use in each process: a forked child must not share the
        # mirror's sockets, nor the turns its parent's threads held or queued for
        self._made: Optional[Tuple[int, _Turns, Any]] = None

    def _made_here(self) -> Tuple[int, _Turns, Any]:
        made, pid = self._made, current_pid()
        if made is None or made[0] != pid:
            with self._lock:
                made = self._made
                if made is None or made[0] != pid:
                    size, waiting = _for_waits(self._client)
                    made = self._made = (pid, _Turns(size), waiting)
        return made

    def _gate(self) -> Tuple[_Turns, Any]:
        made = self._made_here()
        return made[1], made[2]

    def read(self, key: str, seconds: float) -> Any:
        """The last element of list ``key`` once there is one, read without taking it
        (BLMOVE onto the same list); None when ``seconds`` pass first. A wait that
        finds every waiting connection taken queues for one (``_Turns``); its
        deadline passed, it returns without one (after a look of its own if no
        glance read its key since it queued)."""
        _, turns, client = self._made_here()
        deadline = time.monotonic() + seconds
        seen = turns.join(key)
        if seen is not None:
            try:
                held = turns.wait(seen, deadline, self._client)
            except BaseException:
                turns.abandon(seen)
                raise
            if not held:
                return self._found(seen)
        try:
            left = max(deadline - time.monotonic(), 0.002)  # BLMOVE's 0 waits for ever
            return client.blmove(key, key, round(left, 3), "RIGHT", "LEFT")
        finally:
            turns.release()

    def _found(self, seen: _Seen) -> Any:
        """What a wait that ran out queued, or was told its result, returns."""
        if isinstance(seen.found, Exception):
            raise seen.found
        if seen.found is not None or seen.looked >= time.monotonic() - GLANCE_EVERY:
            return seen.found
        try:  # timeout=0, say, or a glance long ago: one look, at most LAST_LOOK s late
            with pool_waits_cut_at(time.monotonic() + LAST_LOOK):
                return self._client.lindex(seen.key, -1)
        except redis.ConnectionError as exc:
            if isinstance(exc, PoolExhausted) or "No connection available" in str(exc):
                return None  # the sending pool stayed full: ran out, as with nothing there
            raise

    def close(self) -> None:
        """Close the waits' own connections; the next wait opens new ones."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None and made[2] is not self._client:
            made[2].close()
