"""A connection per thread, made from the client's pool and never shared.

The hot path takes no pool lock and makes no pool round trip: each thread keeps
its own connection for calls and another for blocking waits, checked against
the pid (a forked child must never share a socket) and against a server that
closed it between calls. Every connection made is remembered weakly, so that
``close()`` reaches those of other threads.
"""
from __future__ import annotations

import mmap
import os
import select
import socket
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple

import redis

from .cluster import ClusterWaiter, wait_readable
from .packing import PackedScript, command
from .writes import WriteFailed


def _fork_mark() -> "Optional[mmap.mmap]":
    """A private page that the kernel empties in a forked child (MADV_WIPEONFORK, Linux
    4.14 on), however the child was forked: ``os.fork()``, or ``fork()`` called from C
    (an extension, ``ctypes``, which runs no Python fork hook). None where the kernel
    has none: the pid is then asked for each time."""
    if not sys.platform.startswith("linux"):
        return None  # the advice's number means something else elsewhere
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        page.madvise(getattr(mmap, "MADV_WIPEONFORK", 18))
    except (AttributeError, OSError, ValueError):
        return None
    page[0] = 1
    return page


#: ``[this process's id]`` while ``FORK_MARK[0]`` reads 1: ``os.getpid()`` is a system
#: call (1.5 us on a VM), and each round trip asks whose connection it may use; reading
#: the mark is a memory read. A hot path reads the two inline, with no call:
#: ``PID_SEEN[0] if FORK_MARK is not None and FORK_MARK[0] else current_pid()``.
PID_SEEN = [os.getpid()]
#: The fork mark (``_fork_mark``), or None where the kernel has none.
FORK_MARK = _fork_mark()


def current_pid() -> int:
    """This process's id, right in any forked child: read again once the mark was wiped."""
    mark = FORK_MARK
    if mark is None:
        return os.getpid()
    if not mark[0]:  # a fork since the last reading: this is the child
        PID_SEEN[0] = os.getpid()  # (before the mark: a thread that reads 1 reads it)
        mark[0] = 1
    return PID_SEEN[0]


@dataclass
class Waiter:
    """A thread's connection for blocking waits; ``keys`` of a BLPOP left pending."""

    pid: int
    connection: Any
    keys: Optional[List[str]] = None


def connected(connection: Any) -> Any:
    """Connect with ``connect()`` before use, never lazily from a send.

    redis-py's send methods reconnect by themselves but skip ``connect()``,
    which a Sentinel-managed connection overrides to ask the sentinels where
    the primary is: a lazy reconnect would go to localhost:6379 instead.
    """
    if getattr(connection, "_sock", True) is None:
        connection.connect()
    return connection


def readable(connection: Any, timeout: float, interrupt: Optional[int] = None) -> bool:
    """True once a reply can be read; False when ``timeout`` seconds pass or the file
    descriptor ``interrupt`` becomes readable first.

    Timed by ``wait_readable`` to the microsecond: socket timeouts poll() in
    whole milliseconds, rounded up, and a delayed task would start up to 1 ms
    late. A TLS socket can be readable with no reply in it (a session ticket):
    its parser is asked again. A test double without a socket cannot be
    interrupted.
    """
    if connection.can_read(timeout=0):
        return True
    sock = getattr(connection, "_sock", None)
    if not isinstance(sock, socket.socket):
        return bool(connection.can_read(timeout=timeout))
    fd = sock.fileno()
    watched = [fd] if interrupt is None else [fd, interrupt]
    deadline = time.monotonic() + timeout
    while True:
        if fd not in wait_readable(watched, deadline):
            return False
        if type(sock) is socket.socket or connection.can_read(timeout=0):
            return True


def has_input(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes (or its end) to read now.

    poll(), not select(), which refuses descriptors from 1024 up; a fresh poll
    object per call costs less than one select() call (0.47 against 0.81 us).
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def load_and_run(connection: Any, script: PackedScript, packed: bytes) -> Any:
    """Load a script the server answered NOSCRIPT for, then run the call again (the
    server forgot scripts, SCRIPT FLUSH: ``load_first`` loads them all again)."""
    connection._minitask_loaded = None
    connection.send_command("SCRIPT", "LOAD", script.source)
    connection.read_response()
    connection.send_packed_command([packed])
    return connection.read_response()


def load_first(connection: Any, scripts: Sequence[PackedScript]) -> None:
    """Before a write of several script calls: load (SCRIPT LOAD, one round trip, before
    any call is written) each of ``scripts`` not loaded on this connection since it
    connected, so that Redis runs the calls in the order written. Redis answers NOSCRIPT
    to a call whose script it does not know (a fresh server, a restart, a failover, a
    SCRIPT FLUSH) and runs the calls behind it; the transport ran that call again only
    once every reply was read, after them: a chord's members (spawn) were queued before
    its state (group_create), a member run at once found no group ('gone', the chord's
    body cancelled), and cancel_steps' calls lost their downstream-most-first order.
    Scripts flushed under a live connection are known at its next NOSCRIPT. A refused
    load (an ACL without SCRIPT LOAD) is left to NOSCRIPT's way; a failed connection is a
    ``WriteFailed``: no call was written."""
    sock = getattr(connection, "_sock", None)
    loaded = getattr(connection, "_minitask_loaded", None)
    if loaded is not None and loaded[0] is sock and loaded[1].issuperset(scripts):
        return  # (the common case: one look, no round trip)
    if loaded is None or loaded[0] is not sock:
        fresh: Set[PackedScript] = set()
        loaded = connection._minitask_loaded = (sock, fresh)
    unknown = [script for script in scripts if script not in loaded[1]]
    by_sha = {script.sha: script.source for script in unknown}
    refused = False
    try:
        connection.send_packed_command([b"".join(command("SCRIPT", "LOAD", source)
                                                 for source in by_sha.values())])
        for _ in by_sha:  # every reply read: the connection stays in step
            try:
                connection.read_response()
            except redis.ResponseError:
                refused = True
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        connection.disconnect()  # a half-read reply must not reach the next caller
        raise WriteFailed(*exc.args) from exc
    if not refused:
        loaded[1].update(unknown)


def _made_uncounted(pool: Any) -> Any:
    """A connection made for a thread's own use, left off the pool's count.

    redis-py counts every connection it makes against the pool's cap
    (``max_connections``, 100 by default), yet a thread's own is never handed
    out by the pool: counted, a thread pool at -c 50 took half the cap, and the
    calls that go through the pool (a stop's give-backs from every thread at
    once) were refused with "Too many connections". Nor is one refused when the
    pool's connections are all in use (100 threads waiting in ``get()`` made every
    ``delay()`` of another thread fail): the count is set aside while it is made,
    under the pool's lock, so that threads starting together never meet a full
    count. A pool with no such count (a blocking pool caps what it hands out) is
    left alone.
    """
    lock = getattr(pool, "_lock", None)
    if lock is None or not isinstance(getattr(pool, "_created_connections", None), int):
        return pool.make_connection()
    with lock:
        counted, pool._created_connections = pool._created_connections, 0
        try:
            return pool.make_connection()
        finally:
            pool._created_connections = counted


class _Local(threading.local):
    """Each thread's connections: none until made. Class attributes, not
    ``getattr(..., None)`` on a bare ``threading.local``, whose miss raises and
    catches an AttributeError (0.6 us) on every round trip of a thread with no
    waiter."""

    held: Optional[Tuple[int, Any]] = None
    waiter: Optional[Waiter] = None
    cluster_waiter: Optional[ClusterWaiter] = None
    #: The wake lists this thread's waits took a token off, not yet asked for.
    took: Optional[List[str]] = None


class Connections:
    """Each thread's own connections to one client's Redis."""

    def __init__(self, client: "redis.Redis | redis.RedisCluster") -> None:
        self.client = client
        # The packed fast path needs a plain connection pool (not Redis Cluster).
        self.pool = client.connection_pool if isinstance(client, redis.Redis) else None
        self._local = _Local()
        # Every live per-thread connection (or cluster waiter), so that close() reaches
        # those of other threads; weak, so a finished thread's still go with it.
        self._made: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._made_lock = threading.Lock()

    def own(self) -> Any:
        """This thread's own connection: no pool round trip on the hot path.

        Checked against the pid, since a forked child must never share a socket.
        """
        held = self._local.held
        mark = FORK_MARK  # (``current_pid`` inline: a call less a round trip)
        pid = PID_SEEN[0] if mark is not None and mark[0] else current_pid()
        if held is None or held[0] != pid:
            held = self._local.held = (pid, self._make())
        connection = held[1]
        sock = getattr(connection, "_sock", None)
        if sock is None:  # (``connected``, called only then: one call less a round trip)
            connection = connected(connection)
            sock = getattr(connection, "_sock", None)
        if isinstance(sock, socket.socket) and has_input(sock):
            # Between calls there is nothing to read: the server closed this connection
            # (a restart, a failover, a timeout). Checked before the write, since after
            # it a lost reply could not tell whether the scripts ran.
            connection.disconnect()
            connection = connected(connection)
        return connection

    def call(self, *command: Any) -> Any:
        """One command on this thread's own connection; dropped if the call breaks."""
        connection = self.own()
        try:
            connection.send_command(*command)
            return connection.read_response()
        except redis.ResponseError:
            raise  # the reply was read: the connection is fine
        except BaseException:
            connection.disconnect()
            raise

    def took(self, key: Optional[str]) -> None:
        """Note the wake list ``key`` this thread's wait took a token off (None: none)."""
        if key is not None:
            local = self._local
            if local.took is None:
                local.took = []
            local.took.append(key)

    def tokens_taken(self) -> List[str]:
        """The wake lists this thread's waits took tokens off since it last asked."""
        local = self._local
        keys, local.took = local.took, None
        return keys or []

    def waiter(self) -> Waiter:
        """This thread's connection for blocking waits, connected."""
        waiter = self._local.waiter
        pid = current_pid()
        if waiter is None or waiter.pid != pid:
            waiter = self._local.waiter = Waiter(pid, self._make())
        connected(waiter.connection)
        return waiter

    def pending_waiter(self) -> Optional[Waiter]:
        """This process's waiter of this thread, if it made one."""
        waiter = self._local.waiter
        return waiter if waiter is not None and waiter.pid == current_pid() else None

    def cluster_waiter(self, made: bool = True) -> Optional[ClusterWaiter]:
        """This thread's BLPOPs on a cluster: one per slot, on the node of its slot
        (None when ``made`` is False and this thread has none yet)."""
        waiter = self._local.cluster_waiter
        if waiter is not None and waiter.pid == current_pid():
            return waiter
        if not made:
            return None
        assert isinstance(self.client, redis.RedisCluster)
        waiter = self._local.cluster_waiter = ClusterWaiter(self.client)
        with self._made_lock:
            self._made.add(waiter)
        return waiter

    def _make(self) -> Any:
        assert self.pool is not None
        connection = _made_uncounted(self.pool)
        with self._made_lock:
            self._made.add(connection)
        return connection

    @contextmanager
    def forking(self) -> Iterator[None]:
        """Hold the client pool's lock while this process forks a child (a process
        pool starting one); the child then calls ``forked()``.

        A child forked while another thread (a heartbeat, a listener) held that
        lock would inherit it locked: redis-py takes it to reset the pool at the
        child's first call, and the child would wait for ever.
        """
        lock = getattr(getattr(self.client, "connection_pool", None), "_lock", None)
        if lock is None:
            yield
            return
        with lock:
            yield

    def forked(self) -> None:
        """In a child forked inside ``forking()``: let go of the lock it inherited held."""
        lock = getattr(getattr(self.client, "connection_pool", None), "_lock", None)
        if lock is not None:
            try:
                lock.release()  # held by this thread: the one that forked, in the parent
            except RuntimeError:
                pass  # not held: the pool had none to hold (a cluster client)

    def disconnect_all(self) -> None:
        """Close every connection made here; a thread that calls again makes a new one."""
        with self._made_lock:
            made, self._made = list(self._made), weakref.WeakSet()
        for connection in made:
            connection.disconnect()
        self._local = _Local()  # the calling thread forgets its closed ones
