"""CancelStore: stopping running tasks on request (``cancel(running=True)``).

A request is an entry in the queue's ``cancels`` stream, posted only while the
task is leased. Every worker of the queue blocks on the stream (XREAD), so the
one that holds the task hears of it within a round trip, with no polling; the
others skip ids they do not hold. A stopped attempt ends ``cancelled`` through
``end_cancelled.lua``, which writes nothing if the attempt finished first.

Data minitask did not write: a stream key of another type leaves its queue out
of the watch (said once, naming the key; looked at again every few seconds) and
refuses requests naming it; an entry whose id is past any time minitask writes
(the last id there is stops every later XADD) has its stream set aside to
``cancels_aside`` by ``request_cancel.lua``, by the request or the watch that
meets it first, and both carry on with a new stream. No request and no starting
watch reads an entry's fields (a planted one may be 100 MB); an entry a watch
reads that no minitask wrote is deleted (``cancel_entries``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import redis

from ..broker.packing import ScriptCall
from ..broker.transport import text
from ..broker.waits import MAX_BLOCK_SECONDS, block_cap
from ..errors import BrokerError
from ..wire.message import MAX_ID_BYTES, MAX_MS, Outcome
from ..wire.serializer import encode_outcome
from .cancel_entries import drop_foreign, request_of
from .foreign import foreign, ignored
from .store import Store

_SCRIPTS = ("request_cancel", "end_cancelled")

#: Requests kept per queue (about: trimmed with MAXLEN ~). A worker reads them
#: within milliseconds, so only a worker cut off from Redis for longer than it
#: takes to post this many could miss one.
STREAM_LENGTH = 1000

#: Most bytes (MEMORY USAGE) a stream of minitask's entries takes: twice its length
#: (MAXLEN ~ trims whole nodes), each an id of MAX_ID_BYTES and its overhead, with
#: room to spare. A bigger one holds entries minitask did not write: a starting watch
#: does not read its last id (XINFO copies its first and last entries inside Redis).
STREAM_BYTES = 2 * STREAM_LENGTH * (MAX_ID_BYTES + 300)

#: One request as a worker reads it: (queue, stream entry id, task id).
Request = Tuple[str, str, str]

#: request_cancel.lua's reply when it set the stream aside first.
_SET_ASIDE = 2

#: How far before the server's time a starting watch reads a stream from when an ACL
#: refuses XINFO (it reads from the stream's last id otherwise): Redis gives a new
#: entry the id max(its clock, the last id + 1), so a clock stepped back a little
#: (NTP) after the watch looked still gives ids past it. Requests of the last second
#: are read again: a watch skips those of tasks its worker does not hold.
START_MARGIN_MS = 1000

#: The entry that ends watches (``wake``), and finds where a stream ends when
#: Redis refuses XINFO and TIME (``positions``): every watch skips it.
_WAKE: Dict[Any, Any] = {"wake": "1"}
_WAKE_READ = {b"wake": b"1"}


def _exhausted(reply: Any) -> bool:
    """Whether an XADD's ``reply`` is Redis's refusal of a stream whose last id there
    is was taken (by an entry deleted since): no minitask entry can follow it."""
    return isinstance(reply, redis.ResponseError) and "last possible ID" in str(reply)


def _planted(entry_id: Any) -> bool:
    """Whether a stream entry id is past any time minitask writes: not minitask's."""
    ms = text(entry_id).partition("-")[0]
    return not ms.isdigit() or int(ms) > MAX_MS


class CancelStore(Store):
    """Requests to stop running tasks, and how a stopped attempt is recorded."""

    scripts = _SCRIPTS

    # -- asking ------------------------------------------------------------------

    def request_call(self, queue: str, task_id: str) -> ScriptCall:
        """The request as a script call (the async producer sends the same one)."""
        k = self.keys(queue)
        return ("request_cancel", queue, (k.leases, k.cancels, k.cancels_aside),
                (task_id, STREAM_LENGTH, MAX_MS, STREAM_BYTES), 0)

    def request(self, queue: str, task_id: str) -> bool:
        """Ask the worker holding ``task_id`` to stop it; False when it is not leased."""
        return self.posted(queue, self.transport.run_calls(
            [self.request_call(queue, task_id)], f"ask to stop task {task_id}")[0])

    def posted(self, queue: str, reply: Any) -> bool:
        """What request_cancel.lua's ``reply`` means (the async producer's too; the first
        item of its reply to a look), said once when it set a stream aside."""
        if reply == _SET_ASIDE:
            self._said_set_aside(queue)
        return bool(reply)

    def _said_set_aside(self, queue: str) -> None:
        k = self.keys(queue)
        ignored(k.cancels, f"it held an entry whose id is past any time minitask writes; "
                           f"the stream was set aside to {k.cancels_aside} and a new one "
                           f"started (delete that one once inspected)")

    def set_aside(self, queue: str) -> bool:
        """Set aside the queue's stream, which holds an entry minitask did not write (a
        watch read one); False, said once, when that is refused (the key named)."""
        return not isinstance(self.look_all([queue])[0], BrokerError)

    def look_all(self, queues: Sequence[str]) -> List[Any]:
        """For each queue, in one round trip where the connection allows: where its
        stream ends as request_cancel.lua reads it, its stream set aside first when it
        holds an id past any minitask writes (said once): the last id (a str; "0-0"
        with no stream), or with XINFO refused the server's time in ms (an int; None:
        TIME refused too); or the BrokerError, said once, of a stream key minitask
        cannot use (another type, or one set aside before that nobody deleted)."""
        calls = [self.request_call(queue, "") for queue in queues]
        try:
            replies = self.transport.run_calls(calls, "look at the cancel requests",
                                               keep_refused=True)
        except BrokerError as exc:  # a cluster's call is sent alone: refusals raise
            if len(calls) != 1 or not foreign(exc):
                raise
            replies = [exc]
        looked: List[Any] = []
        for queue, reply in zip(queues, replies):
            if isinstance(reply, BrokerError):
                if not foreign(reply):
                    raise reply
                said = (f"it holds another type ({reply})" if "WRONGTYPE" in str(reply)
                        else str(reply))
                ignored(self.keys(queue).cancels, f"{said}; running tasks of queue {queue!r} "
                                                  f"cannot be stopped on request until it "
                                                  f"is fixed")
                looked.append(reply)
                continue
            self.posted(queue, reply[0])
            looked.append(text(reply[1]) if reply[1] else int(reply[2]) if reply[2] else None)
        return looked

    # -- the worker side -----------------------------------------------------------

    def end(self, queue: str, task_id: str, outcome: Outcome, result_ttl_ms: int,
            entry: bytes = b"", recent_length: int = 0) -> bool:
        """Record a stopped attempt as cancelled; False when its lease was gone (the
        attempt's own outcome was recorded first, and stays). ``entry`` goes in the
        queue's record of recent outcomes, kept to ``recent_length`` entries."""
        k = self.keys(queue)
        return bool(self.transport.run(
            "end_cancelled", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying,
                              k.order, k.result(task_id), k.flow, k.flow_due,
                              k.flow_prefix, k.wake, k.recent),
            (task_id, encode_outcome(outcome), result_ttl_ms, recent_length, entry),
            f"record the cancellation of {task_id}"))

    def groups(self, queues: Sequence[str]) -> List[List[str]]:
        """Queues whose streams one XREAD can wait on together: all of them on one
        Redis; one each on a cluster, where the streams live in different slots."""
        if isinstance(self.transport.client, redis.RedisCluster):
            return [[queue] for queue in queues]
        return [list(queues)]

    def positions(self, queues: Sequence[str],
                  seen: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """Where to read each queue's stream from: its last id now (every later
        request's id is past it, whatever Redis's clock does), so that neither an entry
        is added (it woke every other watch, and failed on a full Redis) nor an entry
        sent (a planted one may be 32 MB); or, for a queue in ``seen`` (watched before
        it was left out), where the watch had read to, so that requests posted while it
        was left out are heard. A queue whose stream key minitask cannot use (another
        type) is left out, said once: one such key must not stop the watch of every
        other queue. For a stream bigger than minitask's (``STREAM_BYTES``: planted
        entries), the id of a wake-up entry the script adds. With XINFO refused (an ACL
        without it), or that entry refused (a full Redis), a little before the server's
        time (``START_MARGIN_MS``); with TIME refused too, a wake-up entry is added and
        its id taken."""
        found: Dict[str, str] = {}
        for queue, end in zip(queues, self.look_all(queues)):
            if isinstance(end, BrokerError):
                continue
            if seen and queue in seen:
                found[queue] = seen[queue]
            elif isinstance(end, str):
                found[queue] = end
            elif end is None:
                found[queue] = self._position_by_wake(queue)
            else:
                found[queue] = f"{max(0, end - START_MARGIN_MS)}-0"
        return found

    def _position_by_wake(self, queue: str) -> str:
        """Where the stream ends, as the id of a wake-up entry added to it (with no
        XINFO nor TIME to read): "0-0" when there is no stream (NOMKSTREAM) or its last id was
        taken (the next request starts a new one)."""
        with self.transport.errors("read the cancel requests"):
            try:
                last = self.transport.client.xadd(self.keys(queue).cancels, _WAKE,
                                                  maxlen=STREAM_LENGTH, approximate=True,
                                                  nomkstream=True)
            except redis.ResponseError as exc:
                if not _exhausted(exc):
                    raise
                return "0-0"
        return text(last) if last else "0-0"

    def wake(self, queues: Sequence[str]) -> None:
        """End the watches blocked on these queues' streams (a stopping worker's own):
        an entry without an id, which every watch reads and skips."""
        with self.transport.errors("wake the cancel watch"):
            for queue in queues:
                self.transport.client.xadd(self.keys(queue).cancels, _WAKE,
                                           maxlen=STREAM_LENGTH, approximate=True)

    def watch(self, positions: Dict[str, str],
              timeout: float = MAX_BLOCK_SECONDS) -> List[Request]:
        """Block until requests follow ``positions`` (updated in place), or ``timeout``
        seconds pass (at most MAX_BLOCK_SECONDS); the requests, oldest first per queue."""
        by_key = {self.keys(queue).cancels: queue for queue in positions}
        streams: Dict[Any, Any] = {key: positions[queue] for key, queue in by_key.items()}
        # within the socket's own timeout (?socket_timeout=2): a quiet watch past it
        # read as Redis lost, and a healthy worker said so at ERROR
        block_ms = max(1, int(min(timeout, block_cap(self.transport.client)) * 1000))
        with self.transport.errors("wait for cancel requests"):
            reply: Any = self.transport.client.xread(streams, block=block_ms)
        found: List[Request] = []
        for key, entries in reply or []:
            queue = by_key[text(key)]
            for entry_id, fields in entries:
                if _planted(entry_id):  # nothing can follow it: start a new stream
                    if self.set_aside(queue):
                        positions[queue] = "0-0"
                    else:  # left out until it is fixed (the watch looks again)
                        del positions[queue]
                    break
                positions[queue] = text(entry_id)
                task_id = request_of(fields)
                if task_id is not None:
                    found.append((queue, text(entry_id), task_id))
                elif fields != _WAKE_READ:
                    drop_foreign(self.transport, text(key), entry_id, fields)
        return found
