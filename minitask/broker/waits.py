"""Blocking waits of idle workers, timed to the microsecond, with a call behind.

An idle worker blocks in BLPOP on its queues' wake-up lists. Redis checks
blocking timeouts only every 1/hz seconds, too coarse for a delayed task
falling due, so this side times the wait itself; where the server allows it,
the fetch rides behind the BLPOP in the same write, so that a wake-up costs one
round trip.
"""
from __future__ import annotations

import socket
from typing import Any, Callable, List, Optional, Sequence

import redis

from ..printable import own_logger
from .connections import Connections, Waiter, connected, load_and_run, readable
from .packing import PackedScript, ScriptCall, command
from .wake_tokens import taken

logger = own_logger(__name__)

#: Idle workers block at most this long per call, so a vanished Redis is noticed.
MAX_BLOCK_SECONDS = 5.0

#: How much longer than its BLPOP's own timeout a wait ended early waits for the
#: replies it has pending.
UNBLOCK_WAIT = 2.0


def block_cap(client: Any) -> float:
    """The longest one blocking read on ``client`` may last: ``MAX_BLOCK_SECONDS``,
    or less when its socket timeout is shorter (redis-py 8 defaults to 5 s), which
    would take a quiet wait for a dead link, retry it for a minute, then fail."""
    kwargs: Any = getattr(client, "get_connection_kwargs", dict)()
    limit = kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        return MAX_BLOCK_SECONDS
    return max(0.002, min(MAX_BLOCK_SECONDS, limit * 0.8))


class Blocked(Exception):
    """Redis refused a wait's BLPOP (``error``: a wake list of another type), and ran
    the calls sent behind it all the same: ``replies`` holds theirs, each refusal (a
    ResponseError) in its place: what they leased must not be left to nobody."""

    def __init__(self, error: Exception, replies: List[Any]) -> None:
        super().__init__(str(error))
        self.error = error
        self.replies = replies


class Waits:
    """Each thread's blocking wait on one client's Redis."""

    def __init__(self, connections: Connections,
                 packed_script: Callable[[str, str, Sequence[str]], PackedScript]) -> None:
        self._connections = connections
        self._packed_script = packed_script
        # Whether a wait may have a call behind it (None: not probed yet).
        self._unblocks: Optional[bool] = None

    def wait(self, keys: List[str], timeout: float, interrupt: Optional[int],
             then: Optional[ScriptCall], before: Sequence[ScriptCall]) -> Optional[Any]:
        """``Transport.wait``, whose docstring says what each argument does."""
        if self._connections.pool is None:
            cluster_waiter = self._connections.cluster_waiter()
            assert cluster_waiter is not None
            cluster_waiter.wait(keys, timeout, MAX_BLOCK_SECONDS, interrupt)
            for key in cluster_waiter.took():
                self._connections.took(key)
            return None
        waiter = self._connections.waiter()
        if (then is not None
                and isinstance(getattr(waiter.connection, "_sock", None), socket.socket)
                and self._waits_with_call()):
            return self._wait_then_call(waiter, keys, timeout, interrupt, [*before, then])
        self._wait_only(waiter, keys, timeout, interrupt)
        return None

    def _wait_only(self, waiter: Waiter, keys: List[str], timeout: float,
                   interrupt: Optional[int]) -> None:
        """The BLPOP stays outstanding on a connection of its own, and this thread
        times the wait itself; the next wait picks the same BLPOP up again. On a
        cluster the keys span slots, so ``cluster.ClusterWaiter`` keeps one BLPOP
        per slot instead.
        """
        connection = waiter.connection
        try:
            if waiter.keys != keys:
                if waiter.keys is not None:
                    connection.disconnect()  # it waits on other keys: drop it
                connection.send_command("BLPOP", *keys, MAX_BLOCK_SECONDS)
                waiter.keys = keys
            if readable(connection, min(max(timeout, 0.0), MAX_BLOCK_SECONDS), interrupt):
                waiter.keys = None
                self._connections.took(taken(connection.read_response()))
        except BaseException:
            waiter.keys = None
            connection.disconnect()  # the reply of the blocked call must not linger
            raise

    def _wait_then_call(self, waiter: Waiter, keys: List[str], timeout: float,
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
            connected(connection)
        packed = [(script, script.pack(tail, dynamic)) for script, tail, dynamic in
                  ((self._packed_script(name, slot, static_keys), tail, dynamic)
                   for name, slot, static_keys, tail, dynamic in calls)]
        try:
            connection.send_packed_command(
                [command("CLIENT", "ID") + command("BLPOP", *keys, MAX_BLOCK_SECONDS)
                 + b"".join(call for _, call in packed)])
            try:
                client_id: Optional[int] = connection.read_response()
            except redis.exceptions.ResponseError:
                client_id = None  # refused by an ACL changed meanwhile? ask again next time
                self._unblocks = None
            # When nothing is due sooner, the BLPOP's own timeout ends it: no UNBLOCK.
            limit = MAX_BLOCK_SECONDS + 0.5 if timeout >= MAX_BLOCK_SECONDS else max(timeout, 0)
            if not readable(connection, limit, interrupt):
                self._unblock(client_id, connection)
            refused: Optional[redis.exceptions.ResponseError] = None
            try:
                self._connections.took(taken(connection.read_response()))  # the wake token, or None
            except redis.exceptions.ResponseError as exc:  # a wake list of another type:
                refused = exc  # the calls behind ran all the same, their replies are read
            replies: List[Any] = []
            missing = []
            for index in range(len(packed)):
                try:
                    replies.append(connection.read_response())
                except redis.exceptions.NoScriptError:  # the call did not run
                    replies.append(None)
                    missing.append(index)
                except redis.exceptions.ResponseError as exc:
                    if isinstance(exc, redis.exceptions.NoPermissionError):
                        self._unblocks = None  # refused by an ACL changed meanwhile? ask again
                    # read on: a call behind may have leased tasks, which must be taken
                    replies.append(exc)
            for index in missing:  # every reply is read: run what did not run, in order
                try:
                    replies[index] = load_and_run(connection, *packed[index])
                except redis.exceptions.ResponseError as exc:
                    replies[index] = exc
        except BaseException:
            connection.disconnect()  # a half-read reply must not reach the next caller
            raise
        if refused is not None:  # the connection is in step: only the wait failed
            raise Blocked(refused, replies)
        return replies  # a refused call stands in its place, for its caller

    def _waits_with_call(self) -> bool:
        """Whether the server allows what a wait with a call behind needs besides
        BLPOP and EVALSHA: CLIENT ID, CLIENT UNBLOCK and (in the script) TIME.

        Asked once, before the first such wait, so that a refusal never meets
        a call already sent.
        """
        if self._unblocks is None:
            call = self._connections.call
            try:
                call("CLIENT", "UNBLOCK", call("CLIENT", "ID"))  # not blocked: 0
                call("TIME")
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
                self._connections.call("CLIENT", "UNBLOCK", client_id)
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as exc:
            logger.debug("CLIENT UNBLOCK failed (%s): waiting for the BLPOP's own timeout", exc)
        if not readable(blocked, MAX_BLOCK_SECONDS + UNBLOCK_WAIT):
            raise redis.ConnectionError(f"no reply to a BLPOP within {MAX_BLOCK_SECONDS} s")

    def stop_waiting(self) -> None:
        """Drop this thread's outstanding BLPOP before it gets busy with a task.

        Left in place, it would take the next wake token while this worker
        runs a task, and an idle worker would not hear of new work.
        """
        if self._connections.pool is None:  # only a cluster client has these
            cluster_waiter = self._connections.cluster_waiter(made=False)
            if cluster_waiter is not None:
                cluster_waiter.stop()
        waiter = self._connections.pending_waiter()
        if waiter is not None and waiter.keys is not None:
            waiter.keys = None
            waiter.connection.disconnect()
