"""RedisBroker: one typed method per atomic operation minitask does on Redis.

This is the only module (with connection.py) that talks to redis-py; its
errors leave here as BrokerError. Scripts live in ``minitask/lua``.
"""
from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import select
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import redis
from redis.exceptions import RedisClusterException

from .cluster import ClusterWaiter
from .errors import BrokerError, ConfigurationError, DecodeError
from .keys import PRIORITIES, AppKeys, QueueKeys
# re-exported: the app checks app and queue names without knowing the key layout
from .keys import check_name as check_name  # noqa: F401
from .message import Message, Outcome, wall_ms
from .serializer import decode_message, encode_message, encode_outcome

logger = logging.getLogger(__name__)

#: Idle workers block at most this long per call, so a vanished Redis is noticed.
MAX_BLOCK_SECONDS = 5.0
#: Wake tokens kept per queue: enough to wake that many idle workers at once.
WAKE_CAP = 256
#: Delayed tasks promoted and expired leases reclaimed per fetch, at most.
BATCH_LIMIT = 1000
#: How much longer than its BLPOP's own timeout a wait ended early waits for the
#: replies it has pending.
UNBLOCK_WAIT = 2.0

_SCRIPTS = ("enqueue", "fetch", "ack", "retry", "bury", "release", "cancel",
            "revive", "purge_dead", "state")


#: One final outcome to record: (queue, task id, encoded outcome, result ttl in ms).
Ack = Tuple[str, str, bytes, int]


@dataclass(frozen=True)
class Delivery:
    """A message handed to this worker under a lease."""

    task_id: str
    body: bytes
    delivery: int
    priority: int

    def message(self) -> Message:
        """The decoded message; raises DecodeError for a corrupt or unknown envelope."""
        return decode_message(self.body)


@dataclass(frozen=True)
class FetchResult:
    deliveries: List[Delivery]
    poisoned: List[str]
    next_event_ms: Optional[int]


@dataclass(frozen=True)
class FetchTerms:
    """What a fetch asks for, other than the queue and the time."""

    lease_ms: int
    count: int
    max_deliveries: int


@dataclass
class _Waiter:
    """A thread's connection for blocking waits; ``keys`` of a BLPOP left pending."""

    pid: int
    connection: Any
    keys: Optional[List[str]] = None


@dataclass(frozen=True)
class DeadLetter:
    task_id: str
    queue: str
    dead_at_ms: int
    body: Optional[bytes]
    info: Optional[bytes]


#: Scripts that move due delayed tasks first: promote.lua's function goes in front.
_PROMOTING = frozenset({"enqueue", "fetch", "revive"})


def _read_script(name: str) -> str:
    folder = importlib.resources.files("minitask") / "lua"
    source = (folder / f"{name}.lua").read_text("utf-8")
    if name in _PROMOTING:
        source = (folder / "promote.lua").read_text("utf-8") + source
    return source


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bulk(value: Any) -> bytes:
    """One RESP bulk string."""
    if not isinstance(value, bytes):
        value = str(value).encode()
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _command(*parts: Any) -> bytes:
    """One command, packed ahead of time."""
    return b"*%d\r\n" % len(parts) + b"".join(_bulk(part) for part in parts)


#: One script call: name, queue, static keys, tail (dynamic keys, then ARGV), dynamic keys.
_Call = Tuple[str, str, Sequence[str], Sequence[Any], int]


def _connected(connection: Any) -> Any:
    """Connect with ``connect()`` before use, never lazily from a send.

    redis-py's send methods reconnect by themselves but skip ``connect()``,
    which a Sentinel-managed connection overrides to ask the sentinels where
    the primary is: a lazy reconnect would go to localhost:6379 instead.
    """
    if getattr(connection, "_sock", True) is None:
        connection.connect()
    return connection


def _readable(connection: Any, timeout: float, interrupt: Optional[int] = None) -> bool:
    """True once a reply can be read; False when ``timeout`` seconds pass or the file
    descriptor ``interrupt`` becomes readable first.

    Timed by select() to the microsecond: socket timeouts poll() in whole
    milliseconds, rounded up, and a delayed task would start up to 1 ms late.
    A TLS socket can be readable with no reply in it (a session ticket): its
    parser is asked again. A test double without a socket cannot be interrupted.
    """
    if connection.can_read(timeout=0):
        return True
    sock = getattr(connection, "_sock", None)
    if not isinstance(sock, socket.socket):
        return bool(connection.can_read(timeout=timeout))
    watched = [sock.fileno()] if interrupt is None else [sock.fileno(), interrupt]
    deadline = time.monotonic() + timeout
    while True:
        ready = select.select(watched, [], [], max(0.0, deadline - time.monotonic()))[0]
        if watched[0] not in ready:
            return False
        if type(sock) is socket.socket or connection.can_read(timeout=0):
            return True


def _load_and_run(connection: Any, script: "_PackedScript", command: bytes) -> Any:
    """Load a script the server answered NOSCRIPT for, then run the call again."""
    connection.send_command("SCRIPT", "LOAD", script.source)
    connection.read_response()
    connection.send_packed_command([command])
    return connection.read_response()


class _PackedScript:
    """A script call whose constant parts (EVALSHA, sha, queue keys) are packed once.

    redis-py packs every argument of every call in Python; on the enqueue,
    fetch and ack paths that costs more than the round trip itself.
    """

    def __init__(self, source: str, static_keys: Sequence[str]) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self.static = len(static_keys)
        self.head = _bulk("EVALSHA") + _bulk(self.sha)
        self.keys = b"".join(_bulk(key) for key in static_keys)

    def pack(self, tail: Sequence[Any], dynamic_keys: int = 0) -> bytes:
        """The whole command; ``tail`` is ``dynamic_keys`` more keys, then ARGV.

        ``_bulk`` written out inline: a call per argument doubled the cost.
        """
        parts = [b"*%d\r\n" % (3 + self.static + len(tail)), self.head,
                 _bulk(self.static + dynamic_keys), self.keys]
        for part in tail:
            if not isinstance(part, bytes):
                part = str(part).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(part), part))
        return b"".join(parts)


class RedisBroker:
    """Typed access to one app's keys on one Redis (or Redis Cluster)."""

    def __init__(self, client: "redis.Redis | redis.RedisCluster", app_name: str,
                 description: str = "") -> None:
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("decode_responses"):
            raise ConfigurationError("minitask needs a Redis client that returns bytes: create "
                                     "it without decode_responses=True")
        self.client = client
        self.app_name = app_name
        self.description = description or repr(client)
        self.app_keys = AppKeys(app_name)
        self._queue_keys: Dict[str, QueueKeys] = {}
        self._known_queues: Set[str] = set()
        self._sources = {name: _read_script(name) for name in _SCRIPTS}
        self._scripts = {name: client.register_script(self._sources[name]) for name in _SCRIPTS}
        # The packed fast path needs a plain connection pool (not Redis Cluster).
        self._pool = client.connection_pool if isinstance(client, redis.Redis) else None
        self._packed: Dict[Tuple[str, str], _PackedScript] = {}
        self._local = threading.local()
        # Every live per-thread connection (or cluster waiter), so that close() reaches
        # those of other threads; weak, so a finished thread's still go with it.
        self._made: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._made_lock = threading.Lock()
        # Whether a wait may have a fetch behind it (None: not probed yet).
        self._unblocks: Optional[bool] = None

    # -- helpers -----------------------------------------------------------------

    def keys(self, queue: str) -> QueueKeys:
        found = self._queue_keys.get(queue)
        if found is None:
            found = self._queue_keys[queue] = QueueKeys(self.app_name, queue)
        return found

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (redis.RedisError, RedisClusterException, OSError) as exc:
            raise BrokerError(f"Redis failed to {what} on {self.description}: {exc}; check "
                              f"that the server is running and reachable") from exc

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any], what: str) -> Any:
        with self._errors(what):
            return self._scripts[name](keys=keys, args=args)

    def _run_packed(self, name: str, queue: str, static_keys: Sequence[str],
                    tail: Sequence[Any], what: str, dynamic_keys: int = 0) -> Any:
        """Run a script on one queue's keys; ``tail`` is the dynamic keys, then ARGV."""
        return self._run_calls([(name, queue, static_keys, tail, dynamic_keys)], what)[-1]

    def _run_calls(self, calls: Sequence[_Call], what: str) -> List[Any]:
        """Run script calls in order, in one round trip where the connection allows
        it (not on Redis Cluster); returns every reply."""
        if self._pool is None:
            return [self._run(name, list(static_keys) + list(tail[:dynamic]), tail[dynamic:],
                              what) for name, _, static_keys, tail, dynamic in calls]
        scripts = [self._packed_script(name, queue, static_keys)
                   for name, queue, static_keys, _, _ in calls]
        commands = [script.pack(call[3], call[4]) for script, call in zip(scripts, calls)]
        return self._send_packed(scripts, commands, what)

    def _packed_script(self, name: str, queue: str, static_keys: Sequence[str]) -> _PackedScript:
        script = self._packed.get((name, queue))
        if script is None:
            script = self._packed[(name, queue)] = _PackedScript(self._sources[name], static_keys)
        return script

    def _connection(self) -> Any:
        """This thread's own connection: no pool round trip on the hot path.

        Checked against the pid, since a forked child must never share a socket.
        """
        held = getattr(self._local, "held", None)
        if held is None or held[0] != os.getpid():
            held = self._local.held = (os.getpid(), self._make_connection())
        connection = _connected(held[1])
        sock = getattr(connection, "_sock", None)
        if isinstance(sock, socket.socket) and select.select([sock], [], [], 0)[0]:
            # Between calls there is nothing to read: the server closed this connection
            # (a restart, a failover, a timeout). Checked before the write, since after
            # it a lost reply could not tell whether the scripts ran.
            connection.disconnect()
            connection = _connected(connection)
        return connection

    def _waiter(self) -> _Waiter:
        waiter = getattr(self._local, "waiter", None)
        if waiter is None or waiter.pid != os.getpid():
            waiter = self._local.waiter = _Waiter(os.getpid(), self._make_connection())
        _connected(waiter.connection)
        return waiter

    def _cluster_waiter(self) -> ClusterWaiter:
        """This thread's BLPOPs on a cluster: one per queue, on the node of its slot."""
        waiter = getattr(self._local, "cluster_waiter", None)
        if waiter is None or waiter.pid != os.getpid():
            assert isinstance(self.client, redis.RedisCluster)
            waiter = self._local.cluster_waiter = ClusterWaiter(self.client)
            with self._made_lock:
                self._made.add(waiter)
        return waiter

    def _make_connection(self) -> Any:
        assert self._pool is not None
        connection = self._pool.make_connection()
        with self._made_lock:
            self._made.add(connection)
        return connection

    def close(self) -> None:
        """Close every connection this broker opened, and its client's pool.

        A thread that uses the broker again later opens a new connection.
        """
        with self._made_lock:
            made, self._made = list(self._made), weakref.WeakSet()
        for connection in made:
            connection.disconnect()
        self._local = threading.local()  # the calling thread forgets its closed ones
        with self._errors("close the connections"):
            self.client.close()

    def _send_packed(self, scripts: Sequence[_PackedScript], commands: Sequence[bytes],
                     what: str) -> List[Any]:
        """Send packed script calls in one write and read every reply, in order.

        Never sent twice: once written, a call may have run even if its reply is
        lost, so a failure is the caller's BrokerError to handle.
        """
        with self._errors(what):
            connection = self._connection()
            try:
                connection.send_packed_command([b"".join(commands)])  # one write, one syscall
                replies: List[Any] = []
                missing = []
                for index in range(len(commands)):
                    try:
                        replies.append(connection.read_response())
                    except redis.exceptions.NoScriptError:
                        missing.append(index)  # first use on this server, or after a flush
                        replies.append(None)
                for index in missing:  # a script that ran is never sent twice
                    replies[index] = _load_and_run(connection, scripts[index], commands[index])
                return replies
            except BaseException:
                connection.disconnect()  # a half-read reply must not reach the next caller
                raise

    def _call(self, *command: Any) -> Any:
        """One command on this thread's own connection; dropped if the call breaks."""
        connection = self._connection()
        try:
            connection.send_command(*command)
            return connection.read_response()
        except redis.ResponseError:
            raise  # the reply was read: the connection is fine
        except BaseException:
            connection.disconnect()
            raise

    # -- producing ---------------------------------------------------------------

    def enqueue(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                now_ms: int) -> int:
        """Store (id, body, priority, due_ms) entries of one queue; returns how many were new."""
        k = self.keys(queue)
        tail: List[Any] = [k.result(task_id) for task_id, _, _, _ in entries]
        tail += (now_ms, WAKE_CAP, BATCH_LIMIT)
        for task_id, body, priority, due_ms in entries:
            tail += (task_id, body, priority, due_ms)
        added = self._run_packed(
            "enqueue", queue, (k.messages, k.delayed, k.wake, *k.ready, k.order, k.sequence),
            tail, f"enqueue into queue {queue!r}", dynamic_keys=len(entries))
        if queue not in self._known_queues:
            self.register_queues([queue])
        return int(added)

    def register_queues(self, queues: Iterable[str]) -> None:
        """Remember queue names app-wide so status and lookups by id can find them."""
        names = [q for q in queues if q not in self._known_queues]
        if names:
            with self._errors("register queues"):
                self.client.sadd(self.app_keys.queues, *names)
            self._known_queues.update(names)

    def queue_names(self) -> List[str]:
        with self._errors("list queues"):
            return sorted(_text(name) for name in self.client.smembers(self.app_keys.queues))

    # -- consuming ---------------------------------------------------------------

    def fetch(self, queue: str, *, now_ms: int, lease_ms: int, count: int,
              max_deliveries: int) -> FetchResult:
        reply = self._run_calls(
            self._fetch_calls(queue, now_ms, lease_ms, count, max_deliveries),
            f"fetch from queue {queue!r}")[-1]
        return self._fetch_result(reply)

    def ack_and_fetch(self, acks: Sequence[Ack], fetch_queue: str, *, now_ms: int,
                      lease_ms: int, count: int,
                      max_deliveries: int) -> Tuple[List[bool], FetchResult]:
        """``ack_many`` then ``fetch`` in one round trip: the drain loop's hot path."""
        what = f"record {len(acks)} result(s) and fetch from queue {fetch_queue!r}"
        groups = self._ack_groups(acks)
        ack_calls = self._ack_calls(groups)
        replies = self._run_calls(
            ack_calls + self._fetch_calls(fetch_queue, now_ms, lease_ms, count, max_deliveries),
            what)
        return (self._held(groups, replies[:len(ack_calls)], len(acks)),
                self._fetch_result(replies[-1]))

    def prepare_ack(self, queue: str, task_id: str, outcome: Optional[Outcome],
                    result_ttl_ms: int, *, task_name: str = "?") -> Ack:
        """A final outcome (None: keep none) encoded for ``ack_many``.

        Raises EncodeError when the outcome's value cannot be encoded: nothing
        is sent, and the caller dead-letters the task instead.
        """
        if outcome is None:
            return (queue, task_id, b"", 0)
        return (queue, task_id, encode_outcome(outcome, task_name=task_name), result_ttl_ms)

    def ack_many(self, acks: Sequence[Ack]) -> List[bool]:
        """Record final outcomes (from ``prepare_ack``) in one round trip.

        Returns, in the given order, whether the caller still held each lease.
        """
        what = f"record the result of {', '.join(task_id for _, task_id, _, _ in acks[:3])}"
        groups = self._ack_groups(acks)
        return self._held(groups, self._run_calls(self._ack_calls(groups), what), len(acks))

    def _ack_calls(self, groups: Dict[str, List[Tuple[int, str, bytes, int]]]) -> List[_Call]:
        """One ack script call per queue."""
        calls: List[_Call] = []
        for queue, group in groups.items():
            k = self.keys(queue)
            tail: List[Any] = [k.result(entry[1]) for entry in group]
            for entry in group:
                tail += entry[1:]
            calls.append(("ack", queue, self._ack_keys(k), tail, len(group)))
        return calls

    @staticmethod
    def _ack_groups(acks: Sequence[Ack]) -> Dict[str, List[Tuple[int, str, bytes, int]]]:
        """The acks by queue, each with its place in the caller's list."""
        groups: Dict[str, List[Tuple[int, str, bytes, int]]] = {}
        for index, (queue, task_id, outcome, ttl_ms) in enumerate(acks):
            groups.setdefault(queue, []).append((index, task_id, outcome, ttl_ms))
        return groups

    @staticmethod
    def _held(groups: Dict[str, List[Tuple[int, str, bytes, int]]], replies: Sequence[Any],
              size: int) -> List[bool]:
        held = [False] * size
        for group, reply in zip(groups.values(), replies):
            for entry, flag in zip(group, reply):
                held[entry[0]] = bool(flag)
        return held

    def _fetch_calls(self, queue: str, now_ms: int, lease_ms: int, count: int,
                     max_deliveries: int) -> List[_Call]:
        return [("fetch", queue, self._fetch_keys(queue),
                 (now_ms, lease_ms, count, max_deliveries, BATCH_LIMIT), 0)]

    def _fetch_keys(self, queue: str) -> Tuple[str, ...]:
        k = self.keys(queue)
        return (k.delayed, k.leases, k.messages, k.deliveries, k.wake, k.dead, *k.ready,
                k.cancelled, k.order)

    @staticmethod
    def _ack_keys(k: QueueKeys) -> Tuple[str, ...]:
        return (k.leases, k.delayed, k.messages, k.deliveries, k.retrying, k.order)

    @staticmethod
    def _fetch_result(reply: Any) -> FetchResult:
        leased, poisoned, next_event = reply
        deliveries = [Delivery(_text(leased[i]), leased[i + 1], int(leased[i + 2]),
                               int(leased[i + 3])) for i in range(0, len(leased), 4)]
        next_ms = int(next_event)
        return FetchResult(deliveries, [_text(p) for p in poisoned],
                           next_ms if next_ms >= 0 else None)

    def wait(self, queues: Sequence[str], timeout: float, *, interrupt: Optional[int] = None,
             then_fetch: Optional[FetchTerms] = None) -> Optional[FetchResult]:
        """Block until a queue may have work, ``timeout`` seconds pass, or the file
        descriptor ``interrupt`` becomes readable.

        With ``then_fetch``, the wait ends with a fetch from the first queue and
        returns its result; None means nothing was fetched (a cluster, a test
        double, an ACL without CLIENT ID, CLIENT UNBLOCK or TIME): the caller
        fetches itself.
        """
        keys = [self.keys(q).wake for q in queues]
        with self._errors("wait for tasks"):
            if self._pool is None:
                self._cluster_waiter().wait(keys, timeout, MAX_BLOCK_SECONDS, interrupt)
                return None
            waiter = self._waiter()
            if (then_fetch is not None
                    and isinstance(getattr(waiter.connection, "_sock", None), socket.socket)
                    and self._waits_with_fetch()):
                return self._wait_then_fetch(waiter, keys, queues[0], timeout, interrupt,
                                             then_fetch)
            self._wait_only(waiter, keys, timeout, interrupt)
            return None

    def _wait_only(self, waiter: _Waiter, keys: List[str], timeout: float,
                   interrupt: Optional[int]) -> None:
        """Redis checks blocking timeouts only every 1/hz seconds (100 ms by
        default), too coarse for a delayed task falling due. So the BLPOP stays
        outstanding on a connection of its own, and this thread times the wait
        itself; the next wait picks the same BLPOP up again. On a cluster the keys
        span slots, so ``cluster.ClusterWaiter`` keeps one BLPOP per slot instead.
        """
        connection = waiter.connection
        try:
            if waiter.keys != keys:
                if waiter.keys is not None:
                    connection.disconnect()  # it waits on other queues: drop it
                connection.send_command("BLPOP", *keys, MAX_BLOCK_SECONDS)
                waiter.keys = keys
            if _readable(connection, min(max(timeout, 0.0), MAX_BLOCK_SECONDS), interrupt):
                waiter.keys = None
                connection.read_response()
        except BaseException:
            waiter.keys = None
            connection.disconnect()  # the reply of the blocked call must not linger
            raise

    def _wait_then_fetch(self, waiter: _Waiter, keys: List[str], queue: str, timeout: float,
                         interrupt: Optional[int], terms: FetchTerms) -> FetchResult:
        """BLPOP and a fetch in one write: Redis runs the fetch the moment the BLPOP
        is served, so a wake-up costs one round trip, not two.

        The fetch runs later than it is sent, so it reads the server's clock.
        When this thread's timer runs out (or ``interrupt`` rings) first, CLIENT
        UNBLOCK ends the BLPOP and the fetch runs then; its reply is always read,
        so nothing it leases is left leased to nobody.
        """
        connection = waiter.connection
        if waiter.keys is not None:  # a BLPOP left pending by a plain wait
            waiter.keys = None
            connection.disconnect()
            _connected(connection)
        script = self._packed_script("fetch", queue, self._fetch_keys(queue))
        fetch = script.pack(("server", terms.lease_ms, terms.count, terms.max_deliveries,
                             BATCH_LIMIT))
        try:
            connection.send_packed_command(
                [_command("CLIENT", "ID") + _command("BLPOP", *keys, MAX_BLOCK_SECONDS) + fetch])
            try:
                client_id: Optional[int] = connection.read_response()
            except redis.exceptions.ResponseError:
                client_id = None  # refused by an ACL changed meanwhile? ask again next time
                self._unblocks = None
            # When nothing is due sooner, the BLPOP's own timeout ends it: no UNBLOCK.
            limit = MAX_BLOCK_SECONDS + 0.5 if timeout >= MAX_BLOCK_SECONDS else max(timeout, 0)
            if not _readable(connection, limit, interrupt):
                self._unblock(client_id, connection)
            connection.read_response()  # the wake token, or None
            try:
                reply = connection.read_response()
            except redis.exceptions.NoScriptError:  # the fetch did not run: run it now
                reply = _load_and_run(connection, script, fetch)
            except redis.exceptions.ResponseError:
                self._unblocks = None  # refused by an ACL changed meanwhile? ask again
                raise
        except BaseException:
            connection.disconnect()  # a half-read reply must not reach the next caller
            raise
        return self._fetch_result(reply)

    def _waits_with_fetch(self) -> bool:
        """Whether the server allows what a wait with a fetch behind needs besides
        BLPOP and EVALSHA: CLIENT ID, CLIENT UNBLOCK and (in the script) TIME.

        Asked once, before the first such wait, so that a refusal never meets
        a fetch already sent.
        """
        if self._unblocks is None:
            try:
                self._call("CLIENT", "UNBLOCK", self._call("CLIENT", "ID"))  # not blocked: 0
                self._call("TIME")
                self._unblocks = True
            except redis.exceptions.NoPermissionError as exc:
                self._unblocks = False
                logger.warning("Redis refused %s: idle workers will fetch after each wake-up "
                               "in a round trip of its own; allow client|id, client|unblock "
                               "and time to save it", exc)
        return self._unblocks

    def _unblock(self, client_id: Optional[int], blocked: Any) -> None:
        """End the BLPOP of ``blocked`` (connection ``client_id``) at once, with CLIENT
        UNBLOCK from this thread's other connection, and wait for its replies.

        If UNBLOCK fails (BUSY while a slow script runs, a broken connection, or
        after a Sentinel failover a different server), the BLPOP's own timeout
        ends it instead. The replies are waited for either way: the fetch behind
        may have leased tasks, which must not be left leased to nobody.
        """
        try:
            if client_id is not None:  # 0 if served meanwhile: its replies are coming
                self._call("CLIENT", "UNBLOCK", client_id)
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as exc:
            logger.debug("CLIENT UNBLOCK failed (%s): waiting for the BLPOP's own timeout", exc)
        if not _readable(blocked, MAX_BLOCK_SECONDS + UNBLOCK_WAIT):
            raise redis.ConnectionError(f"no reply to a BLPOP within {MAX_BLOCK_SECONDS} s")

    def stop_waiting(self) -> None:
        """Drop this thread's outstanding BLPOP before it gets busy with a task.

        Left in place, it would take the next wake token while this worker
        runs a task, and an idle worker would not hear of new work.
        """
        cluster_waiter = getattr(self._local, "cluster_waiter", None)
        if cluster_waiter is not None and cluster_waiter.pid == os.getpid():
            cluster_waiter.stop()
        waiter = getattr(self._local, "waiter", None)
        if waiter is not None and waiter.keys is not None and waiter.pid == os.getpid():
            waiter.keys = None
            waiter.connection.disconnect()

    def renew(self, queue: str, leases: Sequence[Tuple[str, int]], deadline_ms: int) -> None:
        """Push the lease deadline of running (id, priority) tasks to ``deadline_ms``."""
        mapping = {task_id: deadline_ms * 10 + 9 - priority for task_id, priority in leases}
        with self._errors(f"renew leases in queue {queue!r}"):
            self.client.zadd(self.keys(queue).leases, mapping, xx=True)

    def ack(self, queue: str, task_id: str, outcome: Optional[Outcome], result_ttl_ms: int,
            *, task_name: str = "?") -> bool:
        """Record one task's final outcome (None: keep none); False when its lease had
        been lost. Raises EncodeError, before anything is sent, for a value that
        cannot be encoded."""
        return self.ack_many([self.prepare_ack(queue, task_id, outcome, result_ttl_ms,
                                               task_name=task_name)])[0]

    def retry(self, queue: str, following: Message, due_ms: int, note: Outcome) -> bool:
        """Schedule ``following`` (the next attempt) at ``due_ms``; ``note`` says why."""
        task_id = following.id
        k = self.keys(queue)
        done = self._run("retry", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying,
                                   k.wake, k.order, k.sequence),
                         (task_id, encode_message(following), due_ms, following.priority,
                          encode_outcome(note)), f"schedule a retry of {task_id}")
        return bool(done)

    def bury(self, queue: str, task_id: str, *, outcome: Outcome, result_ttl_ms: int) -> bool:
        """Move a task to the dead letters with ``outcome`` saying why (and when)."""
        k = self.keys(queue)
        done = self._run("bury", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying,
                                  k.dead, k.dead_info, k.result(task_id), k.order),
                         (task_id, outcome.finished_at_ms, encode_outcome(outcome),
                          result_ttl_ms), f"dead-letter {task_id}")
        return bool(done)

    def release(self, queue: str, leases: Sequence[Tuple[str, int]]) -> int:
        """Give leased (id, priority) tasks back to the head of their queue."""
        if not leases:
            return 0
        k = self.keys(queue)
        args: List[Any] = []
        for task_id, priority in leases:
            args += (task_id, priority)
        return int(self._run("release", (k.leases, k.deliveries, k.wake, *k.ready), args,
                             f"give back tasks to queue {queue!r}"))

    def message_body(self, queue: str, task_id: str) -> Optional[bytes]:
        with self._errors(f"read message {task_id}"):
            body = self.client.hget(self.keys(queue).messages, task_id)
        return body  # type: ignore[return-value]

    # -- handles -----------------------------------------------------------------

    def cancel(self, queue: str, task_id: str, result_ttl_ms: int) -> bool:
        """Withdraw a task that has not started; False when it started, ended or is unknown."""
        body = self.message_body(queue, task_id)
        if body is None:
            return False  # finished, cancelled already, or never here
        try:
            priority = decode_message(body).priority
        except DecodeError:
            priority = -1  # unknown: its stale entry is counted as ready until fetch drops it
        # The priority read above can only be stale if the id finished and was enqueued
        # again in between; then one count is off until fetch drops the entry.
        outcome = encode_outcome(Outcome("cancelled", wall_ms(), exc_type="Cancelled",
                                         message="cancelled before it started"))
        k = self.keys(queue)
        done = self._run("cancel", (k.delayed, k.leases, k.dead, k.messages, k.retrying,
                                    k.result(task_id), k.deliveries, k.order, k.cancelled),
                         (task_id, outcome, result_ttl_ms, priority), f"cancel {task_id}")
        return bool(done)

    def state(self, queue: str, task_id: str) -> Tuple[str, Optional[bytes]]:
        k = self.keys(queue)
        state, outcome = self._run("state", (k.leases, k.delayed, k.retrying, k.dead, k.messages,
                                             k.result(task_id)),
                                   (task_id,), f"read the state of {task_id}")
        return _text(state), outcome or None

    def wait_result(self, queue: str, task_id: str, timeout: float) -> Optional[bytes]:
        """Block until the task's outcome exists (at most ``timeout`` seconds, capped)."""
        key = self.keys(queue).result(task_id)
        seconds = min(max(timeout, 0.002), MAX_BLOCK_SECONDS)
        with self._errors(f"wait for the result of {task_id}"):
            # Moving the single element onto the same list reads it without consuming it.
            found = self.client.blmove(
                key, key, round(seconds, 3), "RIGHT", "LEFT")  # type: ignore[arg-type]
        return found if isinstance(found, bytes) else None

    def find_queue(self, task_id: str, queues: Sequence[str]) -> Optional[str]:
        """The queue among ``queues`` that knows ``task_id``, if any."""
        for queue in queues:
            if self.state(queue, task_id)[0] != "unknown":
                return queue
        return None

    # -- dead letters ------------------------------------------------------------

    def dead_letters(self, queue: str, limit: int) -> List[DeadLetter]:
        k = self.keys(queue)
        with self._errors(f"list dead letters of queue {queue!r}"):
            entries: List[Tuple[bytes, float]] = self.client.zrange(  # type: ignore[assignment]
                k.dead, 0, limit - 1, withscores=True)
            ids = [_text(task_id) for task_id, _ in entries]
            if not ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(k.messages, ids)
            pipe.hmget(k.dead_info, ids)
            bodies, infos = pipe.execute()
        return [DeadLetter(task_id, queue, int(score), body, info)
                for (task_id, (_, score), body, info) in zip(ids, entries, bodies, infos)]

    def revive(self, queue: str, task_id: str, body: bytes, priority: int, now_ms: int) -> bool:
        """Put a dead task at the tail of its queue, behind every task due by ``now_ms``."""
        k = self.keys(queue)
        done = self._run("revive", (k.dead, k.dead_info, k.messages, k.wake, k.result(task_id),
                                    *k.ready, k.delayed, k.order),
                         (task_id, body, priority, now_ms, BATCH_LIMIT),
                         f"requeue dead task {task_id}")
        return bool(done)

    def purge_dead(self, queue: str, task_ids: Sequence[str]) -> int:
        if not task_ids:
            return 0
        k = self.keys(queue)
        return int(self._run("purge_dead", (k.dead, k.dead_info, k.messages), task_ids,
                             f"purge dead letters of queue {queue!r}"))

    def dead_ids(self, queue: str, limit: int) -> List[str]:
        with self._errors(f"list dead letters of queue {queue!r}"):
            return [_text(i) for i in self.client.zrange(self.keys(queue).dead, 0, limit - 1)]

    # -- monitoring --------------------------------------------------------------

    def queue_counts(self, queue: str) -> Dict[str, Any]:
        """Ready tasks per priority, and the scheduled, running and dead counts."""
        k = self.keys(queue)
        with self._errors(f"count tasks of queue {queue!r}"):
            pipe = self.client.pipeline(transaction=False)
            for key in k.ready:
                pipe.llen(key)
            pipe.zcard(k.delayed)
            pipe.zcard(k.leases)
            pipe.zcard(k.dead)
            for priority in PRIORITIES:  # cancelled entries still in the ready lists
                pipe.zcount(k.cancelled, priority, priority)
            counts = pipe.execute()
        ready = [max(0, int(entries) - int(cancelled))
                 for entries, cancelled in zip(counts[:10], counts[13:])]
        by_priority = {str(p): c for p, c in zip(PRIORITIES, ready) if c}
        return {"ready": sum(ready), "ready_by_priority": by_priority,
                "scheduled": int(counts[10]), "running": int(counts[11]), "dead": int(counts[12])}

    def heartbeat(self, worker: str, info: Dict[str, Any], now_ms: int, ttl_ms: int) -> None:
        """Record a live worker and its counters; the record expires if it stops beating."""
        key = self.app_keys.worker(worker)
        with self._errors("record the worker heartbeat"):
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(self.app_keys.workers, {worker: now_ms})
            pipe.hset(key, mapping={name: str(value) for name, value in info.items()})
            pipe.pexpire(key, ttl_ms)
            pipe.execute()

    def forget_worker(self, worker: str) -> None:
        with self._errors("unregister the worker"):
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(self.app_keys.workers, worker)
            pipe.delete(self.app_keys.worker(worker))
            pipe.execute()

    def workers(self, now_ms: int, live_ms: int) -> List[Dict[str, str]]:
        """Workers whose last heartbeat is at most ``live_ms`` old; older ones are pruned."""
        with self._errors("list workers"):
            self.client.zremrangebyscore(self.app_keys.workers, "-inf", now_ms - live_ms)
            names = [_text(n) for n in self.client.zrange(self.app_keys.workers, 0, -1)]
            found = []
            for name in names:
                info = {_text(f): _text(v)
                        for f, v in self.client.hgetall(self.app_keys.worker(name)).items()}
                if info:
                    info["name"] = name
                    found.append(info)
        return found
