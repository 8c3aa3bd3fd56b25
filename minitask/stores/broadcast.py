"""BroadcastStore: a queue's broadcast log, its subscribers and their cursors.

A broadcast call is written once, to the log of its queue, with the names of
the subscribers at send time. Each subscriber's workers *pull* its next calls
into the subscriber's lane (``keys.lane``): a queue of its own under the same
hash tag, where fetch, leases, retries and dead letters are those of any
queue. A call leaves the log once every subscriber has pulled it, or when it
is over ``broadcast_maxlen`` or older than ``broadcast_ttl``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..broker.durability import Durability
from ..broker.keys import lane
from ..broker.packing import ScriptCall
from ..broker.transport import Transport, text
from ..errors import BrokerError
from ..printable import printable
from .foreign import ignored, name_of, shown_member, text_of, whole
from .queue import BATCH_LIMIT, WAKE_CAP
from .store import Store

_SCRIPTS = ("broadcast_send", "broadcast_pull", "broadcast_subscribe", "broadcast_unsubscribe")
#: Sends that find the subscribers changed under them, at most, before giving up.
_RESENDS = 16


@dataclass(frozen=True)
class Cursor:
    """Where one subscriber is in a queue's broadcast log."""

    name: str
    lag: int
    last_seen_ms: Optional[int]


#: The highest call sequence a queue's log can hold (lib.lua's MAX_SCORE).
_MAX_SEQ = 2534023007999999


@dataclass(frozen=True)
class Pulled:
    """What a pull did: calls moved to the lane, calls missed, and whether more wait."""

    pulled: int
    skipped: int
    more: bool
    #: '' or what of another's data the pull skipped or replaced (to log)
    note: str = ""


class BroadcastStore(Store):
    """The broadcast calls of one app's queues."""

    scripts = _SCRIPTS
    library = "broadcast_lib"

    def __init__(self, transport: Transport, app_name: str) -> None:
        super().__init__(transport, app_name)
        # queue -> the subscribers last seen there (sorted): a send passes them, and
        # the script says when they changed.
        self._known: Dict[str, List[str]] = {}

    def _common(self, queue: str) -> Tuple[str, ...]:
        k = self.keys(queue)
        parts = ("state", "log", "bodies", "sent", "cursors")
        return tuple(k.broadcast(part) for part in parts)

    def send(self, queue: str, entries: Sequence[Tuple[str, bytes]], now_ms: int, *,
             maxlen: int, ttl_ms: int, durability: Optional[Durability] = None) -> int:
        """Add (id, body) calls to the queue's log for its subscribers; how many were new."""
        k = self.keys(queue)
        names = self._known.get(queue, [])
        for _ in range(_RESENDS):
            wakes = [self.keys(lane(queue, name)).wake for name in names]
            tail: List[Any] = [*wakes, now_ms, maxlen, ttl_ms, WAKE_CAP, BATCH_LIMIT,
                               len(names), *names]
            for task_id, body in entries:
                tail += (task_id, body)
            done, reply = self.transport.run_calls(
                [("broadcast_send", queue, (*self._common(queue), k.broadcast("names"),
                                            k.broadcast("joins")), tail, len(wakes))],
                f"send a broadcast to queue {queue!r}", durability)[-1]
            if int(done):
                self._known[queue] = names
                return int(reply)
            names = sorted(text(name) for name in reply)
        raise BrokerError(f"the subscribers of queue {queue!r} kept changing during "
                          f"{_RESENDS} tries to send a broadcast; nothing was sent: send it "
                          f"again")

    def pull_call(self, queue: str, subscriber: str, count: int,
                  now_ms: Optional[int]) -> ScriptCall:
        """A pull of up to ``count`` calls into the subscriber's lane (0: only re-arm
        the lane's wake when calls wait), to send with the lane's fetch; ``now_ms``
        None reads the server's clock (a pull sent behind a wait)."""
        k = self.keys(queue)
        own = self.keys(lane(queue, subscriber))
        now: Any = "server" if now_ms is None else now_ms
        return ("broadcast_pull", lane(queue, subscriber),
                (*self._common(queue), k.broadcast("seen"), own.messages, own.ready[0],
                 own.wake), (subscriber, count, now, WAKE_CAP, BATCH_LIMIT), 0)

    @staticmethod
    def pulled(reply: Any) -> Pulled:
        pulled, skipped, more, note = reply
        return Pulled(int(pulled), int(skipped), bool(int(more)),
                      text_of(note) or printable(note))

    def subscribe(self, queue: str, subscriber: str, now_ms: int) -> bool:
        """Subscribe ``subscriber`` to the queue's broadcasts from now on (an existing
        subscription keeps its place); True when it is new."""
        k = self.keys(queue)
        return bool(self.transport.run(
            "broadcast_subscribe", (k.broadcast("state"), k.broadcast("cursors"),
                                    k.broadcast("seen")),
            (subscriber, now_ms), f"subscribe {subscriber!r} to queue {queue!r}"))

    def seen(self, queues: Sequence[str], subscriber: str, now_ms: int) -> List[str]:
        """Record that a worker of ``subscriber`` is alive, for each of ``queues``; the
        keys Redis refused (data minitask did not write), each with its error."""
        keys = [self.keys(queue).broadcast("seen") for queue in queues]
        with self.transport.errors(f"say subscriber {subscriber!r} is alive"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.hset(key, subscriber, now_ms)
            replies = pipe.execute(raise_on_error=False)
        return [f"{key} ({printable(reply)})" for key, reply in zip(keys, replies)
                if isinstance(reply, Exception)]

    def unsubscribe(self, queue: str, subscriber: str) -> bool:
        """Remove a subscriber; False when it was not subscribed."""
        self._known.pop(queue, None)
        return bool(self.transport.run(
            "broadcast_unsubscribe", (*self._common(queue), self.keys(queue).broadcast("seen")),
            (subscriber, BATCH_LIMIT), f"unsubscribe {subscriber!r} from queue {queue!r}"))

    def cursors(self, queue: str) -> List[Cursor]:
        """The queue's subscribers with how many calls each has not pulled, by name."""
        k = self.keys(queue)
        keys = [k.broadcast("state"), k.broadcast("cursors"), k.broadcast("seen")]
        with self.transport.errors(f"list the subscribers of queue {queue!r}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.hget(keys[0], "seq")
            pipe.hgetall(keys[1])
            pipe.hgetall(keys[2])
            replies = pipe.execute(raise_on_error=False)
        for key, reply in zip(keys, replies):
            if isinstance(reply, Exception):
                ignored(key, f"it holds another type than a hash ({reply})")
        seq, cursors, seen = [{} if isinstance(reply, Exception) else reply
                              for reply in replies]
        last = whole(seq, 0, _MAX_SEQ) or 0
        found = []
        for raw, cursor in cursors.items():
            name = name_of(raw, "subscriber")
            if name is None:
                ignored(keys[1], f"{shown_member(raw)} is no subscriber name")
                continue
            at = whole(cursor, 0, last)
            if at is None:
                ignored(keys[1], f"the cursor {printable(cursor)!r} of {name!r} is no call "
                                 f"sequence up to {last}")
            found.append(Cursor(name, max(0, last - (at or 0)), whole(seen.get(raw), 0)))
        return sorted(found, key=lambda cursor: cursor.name)

    def names(self, queue: str, call_id: str) -> Optional[List[str]]:
        """The subscribers a call was sent to; None once that is no longer kept."""
        with self.transport.errors(f"read the subscribers of broadcast {call_id}"):
            joined = self.transport.client.hget(self.keys(queue).broadcast("names"), call_id)
        if joined is None:
            return None
        return [name for name in text(joined).split("\n") if name]

    def passed(self, queue: str, call_id: str, names: Sequence[str]) -> List[str]:
        """Those of ``names`` that will not pull the call any more: their cursor is
        past it, or it left the log unpulled (all of them once it is forgotten)."""
        if not names:
            return []
        k = self.keys(queue)
        with self.transport.errors(f"read where the subscribers of broadcast {call_id} are"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(k.broadcast("joins"), call_id)
            pipe.hget(k.broadcast("state"), "dropped")
            pipe.hmget(k.broadcast("cursors"), list(names))
            seq, dropped, cursors = pipe.execute()
        if seq is None or seq <= (_number(dropped) or 0):
            return list(names)
        return [name for name, cursor in zip(names, cursors) if (_number(cursor) or 0) >= seq]

    def log_size(self, queue: str) -> int:
        """Calls in the queue's log: some subscriber has not pulled them."""
        with self.transport.errors(f"count the broadcasts of queue {queue!r}"):
            return int(self.transport.client.zcard(self.keys(queue).broadcast("log")))


def _number(value: Any) -> Optional[int]:
    """A call sequence read back (a score, a field), or None: not one minitask wrote."""
    return whole(value, 0, _MAX_SEQ)
