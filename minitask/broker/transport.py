"""Transport: how minitask talks to one Redis (or Redis Cluster).

A connection per thread, scripts loaded once and reloaded after NOSCRIPT,
script calls packed ahead of time and sent in one write, and the blocking
wait of idle workers with its unblock. It knows no key and no script by
heart: the stores (``minitask.stores``) register their scripts here and
build their calls; writes to be confirmed by replicas get their WAIT in the
same write (durability.py). With connection.py, the only module that talks to
redis-py; its errors leave here as BrokerError.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import select
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import redis
from redis.exceptions import RedisClusterException

from .cluster import ClusterWaiter, run_on_primary, wait_readable
from .durability import (Durability, fsync_refused, has_waitaof, needs_confirmation,
                         read_confirmation)
from ..errors import BrokerError, ConfigurationError, broker_error

logger = logging.getLogger(__name__)

#: Idle workers block at most this long per call, so a vanished Redis is noticed.
MAX_BLOCK_SECONDS = 5.0


def block_cap(client: Any) -> float:
    """The longest one blocking read on ``client`` may last: ``MAX_BLOCK_SECONDS``,
    or less when its socket timeout is shorter (redis-py 8 defaults to 5 s), which
    would take a quiet wait for a dead link, retry it for a minute, then fail."""
    kwargs: Any = getattr(client, "get_connection_kwargs", dict)()
    limit = kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        return MAX_BLOCK_SECONDS
    return max(0.002, min(MAX_BLOCK_SECONDS, limit * 0.8))


#: How much longer than its BLPOP's own timeout a wait ended early waits for the
#: replies it has pending.
UNBLOCK_WAIT = 2.0

#: One script call: (script name, slot, static keys, tail, dynamic key count). The
#: tail is the dynamic keys, then ARGV; the slot (a queue's name, say) tells apart
#: calls whose static keys differ, so each is packed once.
ScriptCall = Tuple[str, str, Sequence[str], Sequence[Any], int]


#: A command a script calls: redis.call('X', or redis.pcall('X', ... and lib.lua's
#: wrappers must(kind, 'X', ... and tolerant(instead, 'X', ...
_SCRIPT_COMMAND = re.compile(r"(?:redis\.p?call\(|(?:must|tolerant)\([^,()]+, )'(\w+)'")


def text(value: Any) -> str:
    """A reply as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _bulk(value: Any) -> bytes:
    """One RESP bulk string."""
    if not isinstance(value, bytes):
        value = str(value).encode()
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _command(*parts: Any) -> bytes:
    """One command, packed ahead of time."""
    return b"*%d\r\n" % len(parts) + b"".join(_bulk(part) for part in parts)


@dataclass
class _Waiter:
    """A thread's connection for blocking waits; ``keys`` of a BLPOP left pending."""

    pid: int
    connection: Any
    keys: Optional[List[str]] = None


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


def _has_input(sock: socket.socket) -> bool:
    """Whether ``sock`` has bytes (or its end) to read now.

    poll(), not select(), which refuses descriptors from 1024 up; a fresh poll
    object per call costs less than one select() call (0.47 against 0.81 us).
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _load_and_run(connection: Any, script: "_PackedScript", command: bytes) -> Any:
    """Load a script the server answered NOSCRIPT for, then run the call again."""
    connection.send_command("SCRIPT", "LOAD", script.source)
    connection.read_response()
    connection.send_packed_command([command])
    return connection.read_response()


class _PackedScript:
    """A script call whose constant parts (EVALSHA, sha, static keys) are packed once.

    redis-py packs every argument of every call in Python; on the enqueue,
    fetch and ack paths that costs more than the round trip itself.
    """

    def __init__(self, name: str, source: str, static_keys: Sequence[str]) -> None:
        self.name = name
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
            kind = type(part)  # exact types first: isinstance() and str() cost more
            if kind is str:
                part = part.encode()
            elif kind is int:
                part = b"%d" % part
            elif kind is not bytes:
                part = part if isinstance(part, bytes) else str(part).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(part), part))
        return b"".join(parts)


class Transport:
    """One client's connections, scripts and blocking waits."""

    def __init__(self, client: "redis.Redis | redis.RedisCluster", description: str = "") -> None:
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("decode_responses"):
            raise ConfigurationError("minitask needs a Redis client that returns bytes: create "
                                     "it without decode_responses=True")
        self.client = client
        self.description = description or repr(client)
        self._sources: Dict[str, str] = {}
        self._scripts: Dict[str, Any] = {}
        # The packed fast path needs a plain connection pool (not Redis Cluster).
        self._pool = client.connection_pool if isinstance(client, redis.Redis) else None
        self._packed: Dict[Tuple[str, str], _PackedScript] = {}
        self._local = threading.local()
        # Every live per-thread connection (or cluster waiter), so that close() reaches
        # those of other threads; weak, so a finished thread's still go with it.
        self._made: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._made_lock = threading.Lock()
        # Whether a wait may have a call behind it (None: not probed yet).
        self._unblocks: Optional[bool] = None
        #: How the writes of durability.CONFIRMED_SCRIPTS are confirmed (the app's setting).
        self.durability = Durability()
        self._waitaof = False  # known to have WAITAOF

    # -- scripts -------------------------------------------------------------------

    def register(self, name: str, source: str) -> None:
        """Make script ``name`` callable; loaded on the server at its first use."""
        self._sources[name] = source
        self._scripts[name] = self.client.register_script(source)

    @contextmanager
    def errors(self, what: str, script: Optional[str] = None) -> Iterator[None]:
        """Turn redis-py's errors into BrokerError saying what failed, and what to do
        (a hint fitting the error: see ``errors.broker_reason``); ``script`` names
        the script the block runs, if any."""
        try:
            yield
        except BrokerError:
            raise
        except (redis.RedisError, RedisClusterException, OSError) as exc:
            raise self._failure(exc, what, script) from exc

    def _failure(self, exc: BaseException, what: str, script: Optional[str]) -> BrokerError:
        commands: List[str] = []
        if script is not None:  # an error path: the script's text is read only now
            commands = sorted({name.lower() for name in
                               _SCRIPT_COMMAND.findall(self._sources.get(script, ""))})
        return broker_error(exc, what, self.description, script=script, commands=commands)

    def run(self, name: str, keys: Sequence[str], args: Sequence[Any], what: str,
            durability: Optional[Durability] = None) -> Any:
        """Run one script through redis-py (any client, Redis Cluster included).

        ``durability`` (default: the app's, for the scripts it covers) may add
        a confirmation by replicas; see ``run_calls``.
        """
        policy = self._confirming([name], durability)
        if policy is not None and self._pool is not None:
            # every key dynamic: packed scripts are kept by (name, slot) with their static keys
            return self.run_calls([(name, "", (), [*keys, *args], len(keys))], what, policy)[0]
        with self.errors(what, name):
            if policy is None:
                return self._scripts[name](keys=keys, args=args)
            assert isinstance(self.client, redis.RedisCluster)
            replies = run_on_primary(self.client, self._scripts[name].sha, self._sources[name],
                                     keys, args, policy.commands(keys[0]))
            for reply in replies[:-1]:  # the script's, the touch's
                if isinstance(reply, Exception):
                    raise reply
            policy.check(replies[-1], what, self.description)
            return replies[0]

    def confirms_writes(self) -> bool:
        """Whether replicas confirm the app's outcome and enqueue writes (its durability)."""
        return self.durability.mode is not None

    def run_calls(self, calls: Sequence[ScriptCall], what: str,
                  durability: Optional[Durability] = None) -> List[Any]:
        """Run script calls in order, in one round trip where the connection allows
        it (not on Redis Cluster); returns every reply.

        When the calls are to be confirmed (``durability``, else the app's for
        the scripts it covers), a touch and WAIT (or WAITAOF) follow them in the
        same write, and DurabilityError says when replicas fell short.
        """
        policy = self._confirming([call[0] for call in calls], durability)
        if self._pool is None:
            return [self.run(name, list(static_keys) + list(tail[:dynamic]), tail[dynamic:],
                             what, policy or Durability())
                    for name, _, static_keys, tail, dynamic in calls]
        scripts = [self._packed_script(name, slot, static_keys)
                   for name, slot, static_keys, _, _ in calls]
        commands = [script.pack(call[3], call[4]) for script, call in zip(scripts, calls)]
        confirm = b"" if policy is None else b"".join(
            _command(*part) for part in policy.commands([*calls[0][2], *calls[0][3]][0]))
        return self._send_packed(scripts, commands, what, (policy, confirm))

    def _confirming(self, names: Sequence[str],
                    durability: Optional[Durability]) -> Optional[Durability]:
        """The confirmation these script calls need, if any; refuses "fsync" on a
        server without WAITAOF before anything is written."""
        policy = durability if durability is not None else (
            self.durability if needs_confirmation(names) else None)
        if policy is None or policy.mode is None:
            return None
        if policy.mode == "fsync" and not self._waitaof:
            with self.errors("ask Redis whether it has WAITAOF"):
                self._waitaof = has_waitaof(self.client)
            if not self._waitaof:
                raise fsync_refused("no such command", self.description)
        return policy

    def pack_call(self, call: ScriptCall) -> bytes:
        """One script call as the EVALSHA command it is sent as (the async producer
        sends these bytes too, rather than have redis-py pack every key again)."""
        name, slot, static_keys, tail, dynamic = call
        return self._packed_script(name, slot, static_keys).pack(tail, dynamic)

    def _packed_script(self, name: str, slot: str, static_keys: Sequence[str]) -> _PackedScript:
        script = self._packed.get((name, slot))
        if script is None:
            script = self._packed[(name, slot)] = _PackedScript(name, self._sources[name],
                                                                static_keys)
        return script

    # -- connections -----------------------------------------------------------------

    def _connection(self) -> Any:
        """This thread's own connection: no pool round trip on the hot path.

        Checked against the pid, since a forked child must never share a socket.
        """
        held = getattr(self._local, "held", None)
        if held is None or held[0] != os.getpid():
            held = self._local.held = (os.getpid(), self._make_connection())
        connection = _connected(held[1])
        sock = getattr(connection, "_sock", None)
        if isinstance(sock, socket.socket) and _has_input(sock):
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
        """This thread's BLPOPs on a cluster: one per slot, on the node of its slot."""
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

    def close(self) -> None:
        """Close every connection this transport opened, and its client's pool.

        A thread that uses it again later opens a new connection.
        """
        with self._made_lock:
            made, self._made = list(self._made), weakref.WeakSet()
        for connection in made:
            connection.disconnect()
        self._local = threading.local()  # the calling thread forgets its closed ones
        with self.errors("close the connections"):
            self.client.close()

    def _send_packed(self, scripts: Sequence[_PackedScript], commands: Sequence[bytes],
                     what: str, confirm: Tuple[Optional[Durability], bytes] = (None, b"")
                     ) -> List[Any]:
        """Send packed script calls in one write and read every reply, in order.

        Never sent twice: once written, a call may have run even if its reply is
        lost, so a failure is the caller's BrokerError to handle. A call that
        Redis refused (a script error) does not stop the others: every reply is
        read, the connection stays usable, and the first refusal is raised.
        ``confirm`` is the durability and its touch and WAIT, sent behind the calls.
        """
        policy, confirmation = confirm
        with self.errors(what):
            connection = self._connection()
            try:
                connection.send_packed_command([b"".join(commands) + confirmation])  # one write
                replies: List[Any] = []
                missing = []
                refused: Optional[Tuple[int, redis.ResponseError]] = None
                for index in range(len(commands)):
                    try:
                        replies.append(connection.read_response())
                    except redis.exceptions.NoScriptError:
                        missing.append(index)  # first use on this server, or after a flush
                        replies.append(None)
                    except redis.ResponseError as exc:
                        refused = refused or (index, exc)
                        replies.append(None)
                waited = read_confirmation(connection, policy)
                for index in missing:  # a script that ran is never sent twice
                    try:
                        replies[index] = _load_and_run(connection, scripts[index],
                                                       commands[index])
                    except redis.ResponseError as exc:
                        if refused is None or index < refused[0]:
                            refused = (index, exc)
                if missing and policy is not None:  # those ran after the WAIT: once more
                    connection.send_packed_command([confirmation])
                    waited = read_confirmation(connection, policy)
            except BaseException:
                connection.disconnect()  # a half-read reply must not reach the next caller
                raise
            if refused is not None:
                index, error = refused
                raise self._failure(error, what, scripts[index].name) from error
            if policy is not None:
                policy.check(waited, what, self.description)
        return replies

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

    # -- blocking waits --------------------------------------------------------------

    def wait(self, keys: List[str], timeout: float, *, interrupt: Optional[int] = None,
             then: Optional[ScriptCall] = None,
             before: Sequence[ScriptCall] = ()) -> Optional[Any]:
        """Block until a BLPOP on ``keys`` is served, ``timeout`` seconds pass, or the
        file descriptor ``interrupt`` becomes readable.

        With ``then`` (a script call that reads the server's clock, and whose
        reply is never nil), the wait ends by running it and returns its reply;
        None means it was not sent (a cluster, a test double, an ACL without
        CLIENT ID, CLIENT UNBLOCK or TIME): the caller runs it itself. Calls in
        ``before`` (same rules) run ahead of ``then``, in order; with them the
        reply is the list of every call's reply, ``then``'s last.
        """
        with self.errors("wait for tasks", None if then is None else then[0]):
            if self._pool is None:
                self._cluster_waiter().wait(keys, timeout, MAX_BLOCK_SECONDS, interrupt)
                return None
            waiter = self._waiter()
            if (then is not None
                    and isinstance(getattr(waiter.connection, "_sock", None), socket.socket)
                    and self._waits_with_call()):
                replies = self._wait_then_call(waiter, keys, timeout, interrupt,
                                               [*before, then])
                return replies if before else replies[-1]
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
                    connection.disconnect()  # it waits on other keys: drop it
                connection.send_command("BLPOP", *keys, MAX_BLOCK_SECONDS)
                waiter.keys = keys
            if _readable(connection, min(max(timeout, 0.0), MAX_BLOCK_SECONDS), interrupt):
                waiter.keys = None
                connection.read_response()
        except BaseException:
            waiter.keys = None
            connection.disconnect()  # the reply of the blocked call must not linger
            raise

    def _wait_then_call(self, waiter: _Waiter, keys: List[str], timeout: float,
                        interrupt: Optional[int], calls: Sequence[ScriptCall]) -> List[Any]:
        """BLPOP and a script call in one write: Redis runs the call the moment the
        BLPOP is served, so a wake-up (say, with a fetch) costs one round trip.

        The call runs later than it is sent, so it must read the server's clock.
        When this thread's timer runs out (or ``interrupt`` rings) first, CLIENT
        UNBLOCK ends the BLPOP and the call runs then; its reply is always read,
        so nothing it changed (tasks it leased) is left to nobody.
        """
        connection = waiter.connection
        if waiter.keys is not None:  # a BLPOP left pending by a plain wait
            waiter.keys = None
            connection.disconnect()
            _connected(connection)
        packed = [(script, script.pack(tail, dynamic)) for script, tail, dynamic in
                  ((self._packed_script(name, slot, static_keys), tail, dynamic)
                   for name, slot, static_keys, tail, dynamic in calls)]
        try:
            connection.send_packed_command(
                [_command("CLIENT", "ID") + _command("BLPOP", *keys, MAX_BLOCK_SECONDS)
                 + b"".join(call for _, call in packed)])
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
            replies: List[Any] = []
            missing = []
            for index in range(len(packed)):
                try:
                    replies.append(connection.read_response())
                except redis.exceptions.NoScriptError:  # the call did not run
                    replies.append(None)
                    missing.append(index)
                except redis.exceptions.ResponseError:
                    self._unblocks = None  # refused by an ACL changed meanwhile? ask again
                    raise
            for index in missing:  # every reply is read: run what did not run, in order
                replies[index] = _load_and_run(connection, *packed[index])
            return replies
        except BaseException:
            connection.disconnect()  # a half-read reply must not reach the next caller
            raise

    def _waits_with_call(self) -> bool:
        """Whether the server allows what a wait with a call behind needs besides
        BLPOP and EVALSHA: CLIENT ID, CLIENT UNBLOCK and (in the script) TIME.

        Asked once, before the first such wait, so that a refusal never meets
        a call already sent.
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
        ends it instead. The replies are waited for either way: the call behind
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
