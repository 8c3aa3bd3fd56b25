"""Transport: how minitask talks to one Redis (or Redis Cluster).

Scripts loaded once and reloaded after NOSCRIPT, script calls packed ahead of
time (``packing``) and sent in one write on each thread's own connection
(``connections``), and the blocking wait of idle workers (``waits``). It knows
no key and no script by heart: the stores (``minitask.stores``) register their
scripts here and build their calls; writes to be confirmed by replicas get
their WAIT in the same write (``durability``). With ``connection``, the only
modules that talk to redis-py; its errors leave here as BrokerError.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import redis
from redis.exceptions import RedisClusterException

from ..errors import BrokerError
from ..printable import own_logger
from .acl_check import CHECKED, SENDING_SCRIPTS, SenderChecks, check_again, check_sender, \
    commands_of, watch_layout
from .cluster_sends import ReplyLost, confirm, send_once
from .connections import Connections, connected, load_and_run, load_first
from .durability import (Durability, cut_short, fsync_refused, has_waitaof,
                         keep_unconfirmed, needs_confirmation, read_confirmation)
from .health import asked_bulk_limit
from .packing import PackedScript, ScriptCall, command
from .pools import ResultWaits
from .refusals import broker_error, refused_in_script
from .replies import require_readable_replies
from .waits import Blocked, Waits
from .writes import WriteFailed, call_ends, closed_after, reply_lost, write_counted

logger = own_logger(__name__)

__all__ = ["Transport", "text"]


def text(value: Any) -> str:
    """A reply as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


class WaitRefused(BrokerError):
    """Redis refused a worker's wait (a wake list of another type), and ran the calls
    sent behind it all the same: ``replies`` holds theirs, a BrokerError in place of
    each refused one (what they leased is held, not left to nobody). Internal to the
    worker, which sets the queue of that wake list aside."""

    def __init__(self, error: BrokerError, replies: List[Any]) -> None:
        super().__init__(str(error), reason=error.reason)
        self.replies = replies


class Transport:
    """One client's scripts, connections and blocking waits."""

    def __init__(self, client: "redis.Redis | redis.RedisCluster", description: str = "") -> None:
        require_readable_replies(client, "it")
        self.client = client
        self.description = description or repr(client)
        self.connections = Connections(client)
        self._waits = Waits(self.connections, self._packed_script)
        #: Drop this thread's outstanding BLPOP before it takes a task (the waits' own)
        self.stop_waiting: Callable[[], None] = self._waits.stop_waiting
        #: the blocking reads of results, on connections apart from those that send
        self.result_waits = ResultWaits(client)
        self._sources: Dict[str, str] = {}
        self.sources = self._sources  # (read only: acl_check.py's)
        self._scripts: Dict[str, Any] = {}
        self._packed: Dict[Tuple[str, str], PackedScript] = {}
        #: How the writes of durability.CONFIRMED_SCRIPTS are confirmed (the app's setting).
        self.durability = Durability()
        self._waitaof = False  # known to have WAITAOF
        #: Until a send's check of the ACL user passed (acl_check.py; on every primary)
        self.acl_unchecked = True
        self.acl_checks = SenderChecks(isinstance(client, redis.RedisCluster))
        if self.acl_checks.cluster:
            watch_layout(self)  # a node made primary later is asked before a send to it

    # -- scripts -------------------------------------------------------------------

    def register(self, name: str, source: str) -> None:
        """Make script ``name`` callable; loaded on the server at its first use."""
        self._sources[name] = source
        self._scripts[name] = self.client.register_script(source)

    def errors(self, what: str, script: Optional[str] = None) -> "_Errors":
        """Turn redis-py's errors into BrokerError saying what failed, and what to do
        (a hint fitting the error: see ``broker.refusals.broker_reason``); ``script`` names
        the script the block runs, if any."""
        return _Errors(self, what, script)

    def failure(self, exc: BaseException, what: str, script: Optional[str],
                sent: bool = False) -> BrokerError:
        commands: List[str] = []
        sent = sent or isinstance(exc, ReplyLost)  # written whole on a cluster: it may have run
        if script is not None:  # an error path: the script's text is read only now
            commands = commands_of([self._sources.get(script, "")])
            # a command refused inside a script that sends tasks: what the script wrote
            # before it stands (Redis checks the ACL at each command), so "maybe", as a
            # lost reply, never "could not"
            sent = sent or (script in SENDING_SCRIPTS and refused_in_script(exc))
        error = broker_error(exc, what, self.description, script=script, commands=commands,
                             sent=sent)
        check_again(self, error)  # refused part way: the ACL changed, checked again
        return error

    def run(self, name: str, keys: Sequence[str], args: Sequence[Any], what: str,
            durability: Optional[Durability] = None) -> Any:
        """Run one script through redis-py; on Redis Cluster, one that sends tasks or is
        confirmed is written once by ``cluster_sends`` (redis-py would write it again).

        ``durability`` (default: the app's, for the scripts it covers): see ``run_calls``.
        """
        if self.acl_unchecked and name in CHECKED:  # (a script that sends no task: no more)
            check_sender(self, [(name, "", keys, (), 0)], what)
        policy = self._confirming([name], durability)
        if policy is not None and self.connections.pool is not None:
            # every key dynamic: packed scripts are kept by (name, slot) with their static keys
            return self.run_calls([(name, "", (), [*keys, *args], len(keys))], what, policy)[0]
        with self.errors(what, name):
            if policy is None and not (name in SENDING_SCRIPTS and self.connections.pool is None):
                return self._scripts[name](keys=keys, args=args)
            replies = send_once(self.client, self._scripts[name].sha, self._sources[name],
                                keys, args, () if policy is None else policy.commands(keys[0]))
            if isinstance(replies[0], Exception):  # the script's refusal: as it says
                raise replies[0]
            if policy is not None:  # (a refused touch or a cut WAIT: after the write)
                confirm(replies, policy, what, self.description)
            return replies[0]

    def confirms_writes(self) -> bool:
        """Whether replicas confirm the app's outcome and enqueue writes (its durability)."""
        return self.durability.mode is not None

    def run_calls(self, calls: Sequence[ScriptCall], what: str,
                  durability: Optional[Durability] = None,
                  keep_refused: bool = False) -> List[Any]:
        """Run script calls in order, in one round trip where the connection allows
        it (not on Redis Cluster); returns every reply.

        When the calls are to be confirmed (``durability``, else the app's for
        the scripts it covers), a touch and WAIT (or WAITAOF) follow them in the
        same write, and DurabilityError says when replicas fell short. With
        ``keep_refused``, a call Redis refused (data minitask did not write) gives its
        BrokerError in its place instead of raising, so that what the others did
        (tasks they leased) is not lost with it.
        """
        if self.acl_unchecked and (calls[0][0] in CHECKED if len(calls) == 1 else  # (no list)
                                   not CHECKED.isdisjoint([call[0] for call in calls])):
            check_sender(self, calls, what)
        # without a durability asked or set, nothing is confirmed: not even looked up
        policy = None if durability is None and self.durability.mode is None else \
            self._confirming([call[0] for call in calls], durability)
        if self.connections.pool is None:  # Redis Cluster: a call at a time, each confirmed
            with keep_unconfirmed() as kept:  # one unconfirmed: the others are made too
                replies = [self.run(name, list(static_keys) + list(tail[:dynamic]),
                                    tail[dynamic:], what, policy or Durability())
                           for name, _, static_keys, tail, dynamic in calls]
            kept.raise_any()  # as one write's WAIT: after every call
            return replies
        scripts: List[PackedScript] = []
        commands: List[bytes] = []
        for name, slot, static_keys, tail, dynamic in calls:
            script = self._packed.get((name, slot)) or self._packed_script(name, slot,
                                                                           static_keys)
            scripts.append(script)
            commands.append(script.pack(tail, dynamic))
        confirm = b"" if policy is None else b"".join(
            command(*part) for part in policy.commands([*calls[0][2], *calls[0][3]][0]))
        return self._send_packed(scripts, commands, what, (policy, confirm), keep_refused)

    def send_commands(self, packed: bytes, count: int, what: str) -> Optional[List[Any]]:
        """Plain commands (no script), packed ahead of time, in one write on this
        thread's own connection; every reply, an error reply in its place as a
        ResponseError. None where there is no such connection (Redis Cluster): the
        caller sends its script instead."""
        if self.connections.pool is None:
            return None
        try:  # (as ``self.errors(what)``, without its object: a plain delay() comes here)
            connection = self.connections.own()
            try:
                return _exchange(connection, packed, count)
            except BaseException as exc:
                connection.disconnect()  # a half-read reply must not reach the next caller
                if reply_lost(exc):  # first: a large write may have run too
                    raise self.failure(exc, what, None, sent=True) from exc
                if isinstance(exc, redis.ConnectionError) and len(packed) > LARGE_COMMAND:
                    raise self._large_command_failed(exc, what, len(packed)) from exc
                raise
        except _FAILURES as exc:
            raise self.failure(exc, what, None) from exc

    def _confirming(self, names: Sequence[str],
                    durability: Optional[Durability]) -> Optional[Durability]:
        """These calls' confirmation, if any; "fsync" refused before any write without WAITAOF."""
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
        """One script call as the EVALSHA it is sent as (the async senders send these too)."""
        name, slot, static_keys, tail, dynamic = call
        script = self._packed.get((name, slot)) or self._packed_script(name, slot, static_keys)
        return script.pack(tail, dynamic)

    def _packed_script(self, name: str, slot: str, static_keys: Sequence[str]) -> PackedScript:
        script = self._packed.get((name, slot))
        if script is None:
            script = self._packed[(name, slot)] = PackedScript(name, self._sources[name],
                                                               static_keys)
        return script

    def _send_packed(self, scripts: Sequence[PackedScript], commands: Sequence[bytes],
                     what: str, confirm: Tuple[Optional[Durability], bytes] = (None, b""),
                     keep_refused: bool = False) -> List[Any]:
        """Send packed script calls in one write and read every reply, in order (several
        run in that order: their scripts loaded first, ``load_first``). Never sent twice:
        once written, a call may have run even if its reply is lost, so a failure is the
        caller's BrokerError to handle. A call that Redis refused (a script error) does
        not stop the others: every reply is read, the connection stays usable, and the
        first refusal is raised. ``confirm``: the durability, its touch and WAIT behind."""
        policy, confirmation = confirm
        try:  # (``errors``, written out: at every round trip, no call of Python)
            connection = self.connections.own()
            try:
                if len(commands) > 1:  # (a write of one: no order to keep, no call)
                    load_first(connection, scripts)
                replies = _exchange(connection, b"".join(commands) + confirmation,
                                    len(commands), call_ends(commands, confirmation))
                missing = []
                refused: Optional[Tuple[int, redis.ResponseError]] = None
                for index, reply in enumerate(replies):
                    if not isinstance(reply, redis.ResponseError):
                        continue
                    if isinstance(reply, redis.exceptions.NoScriptError):
                        missing.append(index)  # first use on this server, or after a flush
                        replies[index] = None
                    elif refused is None:
                        refused = (index, reply)
                if refused is not None and closed_after(refused[1]):
                    connection.disconnect()  # Redis closed it: nothing after ran
                    raise self.failure(refused[1], what, scripts[refused[0]].name) \
                        from refused[1]
                waited = (None if policy is None else  # (a cut: its error, checked below)
                          self._confirmation(connection, policy, what))
                for index in missing:  # a script that ran is never sent twice
                    try:
                        replies[index] = load_and_run(connected(connection), scripts[index],
                                                      commands[index])
                    except redis.ResponseError as exc:
                        replies[index] = exc
                        if refused is None or index < refused[0]:
                            refused = (index, exc)
                if missing and policy is not None:  # those ran after the WAIT: once more
                    connection.send_packed_command([confirmation])
                    waited = self._confirmation(connection, policy, what)
            except BaseException as exc:
                connection.disconnect()  # a half-read reply must not reach the next caller
                whole = exc.whole if isinstance(exc, WriteFailed) else None
                if reply_lost(exc) or whole:  # first: a large write may have run too
                    lost = self.failure(exc, what, None, sent=True)
                    if len(commands) > 1:  # a cut write of several: only those may have run
                        lost.sent_calls = whole
                    raise lost from exc
                size = sum(map(len, commands))
                if isinstance(exc, redis.ConnectionError) and size > LARGE_COMMAND:
                    raise self._large_command_failed(exc, what, size) from exc
                raise
            if refused is not None and keep_refused:
                replies = [self.failure(reply, what, script.name)
                           if isinstance(reply, redis.ResponseError) else reply
                           for script, reply in zip(scripts, replies)]
            elif refused is not None:
                index, error = refused
                raise self.failure(error, what, scripts[index].name) from error
            if policy is not None:
                policy.check(waited, what, self.description)
        except _FAILURES as exc:
            raise self.failure(exc, what, None) from exc
        return replies

    def _confirmation(self, connection: Any, policy: Durability, what: str) -> Any:
        """``read_confirmation``, the scripts' replies read already: a socket timeout
        now cut a WAIT short, on a write that was made: its DurabilityError (not the
        "is Redis running" of a dead link) in WAIT's place, for ``Durability.check``
        to raise or keep once the calls' refusals are in place and those Redis did
        not know (NOSCRIPT) have run: raised here, it counted them written."""
        try:
            return read_confirmation(connection, policy)
        except redis.TimeoutError as exc:
            connection.disconnect()  # WAIT's reply may still come: not for the next caller
            cut = cut_short(policy, what, self.description, exc)
            cut.__cause__ = exc
            return cut

    def _large_command_failed(self, exc: redis.ConnectionError, what: str,
                              size: int) -> BrokerError:
        """A command over 1 MiB met a closed connection. Redis closes it as it reads a
        value over its ``proto-max-bulk-len``, and its error reply is lost when the
        reset comes before the end of our write. It refused this command (reason
        'protocol': sent again, it would be refused again) only if the write failed,
        Redis answers on a new connection and the command is longer than the limit
        it states; a reset of another cause (a failover, CLIENT KILL, a proxy) is an
        outage ('unreachable'), written again. A server that does not say its limit
        (CONFIG refused) is taken at its word that it is up: else a command it can
        never read would be written again for ever."""
        if isinstance(exc, WriteFailed) and self._answers():
            limit = asked_bulk_limit(self.client)
            if limit is None or size > limit:
                stated = "" if limit is None else f", over its proto-max-bulk-len of {limit:,}"
                return self.failure(redis.ResponseError(
                    f"Protocol error: Redis closed the connection as it read a command of "
                    f"{size:,} bytes{stated}, and answers on a new one"), what, None)
        return BrokerError(f"{self.failure(exc, what, None)} (the command was {size:,} "
                           f"bytes: Redis also closes the connection as it reads a value "
                           f"over its proto-max-bulk-len)", reason="unreachable")

    def _answers(self) -> bool:
        """Whether Redis answers a PING on this thread's connection (made anew)."""
        try:
            connection = self.connections.own()
        except (redis.RedisError, OSError):
            return False
        try:
            connection.send_command("PING")
            return bool(connection.read_response())
        except (redis.RedisError, OSError):
            connection.disconnect()
            return False

    # -- connections and waits ---------------------------------------------------------

    def close(self) -> None:
        """Close every connection this transport opened, and its client's pool.

        A thread that uses it again later opens a new connection.
        """
        self.connections.disconnect_all()
        with self.errors("close the connections"):
            self.result_waits.close()
            self.client.close()

    def wait_result(self, key: str, seconds: float, what: str) -> Optional[bytes]:
        """The kept result at ``key`` (a list of one), read without taking it, once it
        exists; None when ``seconds`` pass first. Blocks on a connection of the
        result waits' own (``pools.ResultWaits``), never on one that sends."""
        with self.errors(what):
            found = self.result_waits.read(key, seconds)
        return found if isinstance(found, bytes) else None

    def wait(self, keys: List[str], timeout: float, *, interrupt: Optional[int] = None,
             then: Optional[ScriptCall] = None,
             before: Sequence[ScriptCall] = ()) -> Optional[Any]:
        """Block until a BLPOP on ``keys`` is served, ``timeout`` seconds pass, or the
        file descriptor ``interrupt`` becomes readable.

        With ``then`` (a script call that reads the server's clock, and whose
        reply is never nil), the wait ends by running it, and calls in ``before``
        (same rules) ahead of it, in order: returns the list of every call's reply,
        ``then``'s last, a BrokerError in place of a refused one (the others may
        have leased tasks); None means they were not sent (a cluster, a test
        double, an ACL without CLIENT ID, CLIENT UNBLOCK or TIME): the caller runs
        them itself. When Redis refuses the wait itself (a wake list of another
        type), the calls ran all the same: ``WaitRefused`` carries their replies.
        """
        what = "wait for tasks"
        calls = [*before, then] if then is not None else []
        with self.errors(what, None if then is None else then[0]):
            try:
                replies = self._waits.wait(keys, timeout, interrupt, then, before)
            except Blocked as blocked:
                raise WaitRefused(self.failure(blocked.error, what, None),
                                  self._refusals_in(blocked.replies, calls, what)) \
                    from blocked.error
        return None if replies is None else self._refusals_in(replies, calls, what)

    def _refusals_in(self, replies: List[Any], calls: Sequence[ScriptCall],
                     what: str) -> List[Any]:
        """``replies`` with a BrokerError in place of each refusal of its call."""
        return [self.failure(reply, what, call[0]) if isinstance(reply, redis.ResponseError)
                else reply for call, reply in zip(calls, replies)]


#: A command larger than this (the least ``proto-max-bulk-len`` Redis takes, 1 MiB)
#: that meets a closed connection may have been refused for its size: said so.
LARGE_COMMAND = 1024 * 1024


def _exchange(connection: Any, data: bytes, count: int,
              ends: Optional[List[int]] = None) -> List[Any]:
    """Write ``data`` (``count`` packed commands) in one write and read their
    ``count`` replies, in order; a command Redis refused has its ResponseError in
    its place, and the replies after it are read all the same (the connection
    stays in step). Any other failure leaves the connection half read: the
    caller disconnects it; a failed write raises ``WriteFailed``: nothing after the
    cut reached Redis, so the last command never ran; those before it may have
    (``ends``, the offset where each command ends: counted in ``whole``)."""
    try:
        if ends is None:
            connection.send_packed_command([data])
        else:
            write_counted(connection, data, ends)
    except WriteFailed:
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:  # (connecting, or writing)
        raise WriteFailed(*exc.args) from exc
    replies: List[Any] = []
    reader, short, push = _buffered(connection) if count > 1 else (None, None, None)
    for _ in range(count):
        try:
            reply = short if reader is None else reader.gets()
            if reply is short:  # nothing parsed yet: read the socket, redis-py's way
                reply = connection.read_response()
            elif type(reply) not in _PLAIN:
                reply = _checked(connection, reply, short, push)
            replies.append(reply)
        except redis.ResponseError as exc:
            replies.append(exc)
            if closed_after(exc):  # no reply follows: the commands after it never ran
                replies += [exc] * (count - len(replies))
                break
    return replies


#: The types of a reply that needs no look: redis-py's ``read_response`` returns them
#: as hiredis parsed them.
_PLAIN = frozenset({bytes, str, int, float, type(None)})
#: The "not enough data" mark of each redis-py parser class's hiredis reader, by class.
_SHORT: Dict[type, Any] = {}


def _buffered(connection: Any) -> Tuple[Any, Any, Any]:
    """The connection's hiredis reader, its "not enough data" mark and the type of a
    RESP3 push message (None: none), or (None, None, None): read the usual way.

    The replies of commands written together mostly arrive in one read: redis-py's
    ``read_response`` (three calls, a description of the host formatted, per reply)
    reads the first, the rest are taken from the reader's buffer as they are, checked
    as ``read_response`` checks them (``_checked``). Only for a parser built on
    hiredis's ``Reader`` whose mark no reply can be (redis-py 5+'s; 4.x's is False,
    which a RESP3 reply can be).
    """
    parser = getattr(connection, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if reader is None:
        return None, None, None
    kind = type(parser)
    if kind not in _SHORT:
        _SHORT[kind] = getattr(sys.modules.get(kind.__module__), "NOT_ENOUGH_DATA", False)
    short = _SHORT[kind]
    if short is False and getattr(connection, "protocol", 2) in (3, "3"):
        return None, None, None
    return reader, short, getattr(parser, "_hiredis_PushNotificationType", None)


def _checked(connection: Any, reply: Any, short: Any, push: Any) -> Any:
    """A reply taken from the reader's buffer, as redis-py's ``read_response`` would
    give it: a RESP3 push message handed to redis-py (the reply is the next), an
    error reply raised (a ConnectionError kind too, or first in an array)."""
    while push is not None and isinstance(reply, push):
        connection._parser.handle_push_response(reply)
        reply = connection._parser._reader.gets()
        if reply is short:
            return connection.read_response()
    if isinstance(reply, (redis.ConnectionError, redis.ResponseError)):
        raise reply
    if type(reply) is list and reply and isinstance(reply[0], redis.ConnectionError):
        raise reply[0]
    return reply


#: What ``Transport.errors`` turns into a BrokerError.
_FAILURES = (redis.RedisError, RedisClusterException, OSError)


class _Errors:
    """``Transport.errors``: a class, not a generator, as it wraps every round trip."""

    __slots__ = ("transport", "what", "script")

    def __init__(self, transport: Transport, what: str, script: Optional[str]) -> None:
        self.transport, self.what, self.script = transport, what, script

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException],
                 traceback: Any) -> None:
        if isinstance(exc, _FAILURES):
            raise self.transport.failure(exc, self.what, self.script) from exc
