"""BroadcastStore: a queue's broadcast log, its subscribers and their cursors.

A broadcast call is written once, to the log of its queue, with its sequence
number: the subscribers it is for are those that subscribed before it (the
``since`` index), so a send's cost does not grow with their number. Each
subscriber's workers *pull* its next calls into the subscriber's lane
(``keys.lane``): a queue of its own under the same hash tag, where fetch,
leases, retries and dead letters are those of any queue. A call leaves the
log once every subscriber has pulled it, or when it is over
``broadcast_maxlen`` or older than ``broadcast_ttl``. A subscriber not seen
for longer than ``broadcast_ttl`` is pruned (a batch per pull or send).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..broker.durability import Durability
from ..broker.keys import lane
from ..broker.packing import ScriptCall
from ..broker.transport import Transport
from ..errors import BrokerError, ConfigurationError
from ..printable import own_logger, printable
from .bounds import DEFAULT_MESSAGE_BYTES
from .broadcast_reads import NAMES_BYTES, PAGE, BroadcastReads, other_type
from .foreign import ignored, name_of, raise_refusals, shown_member, text_of, whole
from .queue import BATCH_LIMIT, WAKE_CAP

logger = own_logger(__name__)

_SCRIPTS = ("broadcast_send", "broadcast_pull", "broadcast_subscribe", "broadcast_unsubscribe",
            "broadcast_wake", "broadcast_alive")
#: Names read from Redis per command when listing who a call went to.
_PAGE = 1000
#: Subscribers of a queue at most for ``join()`` without ``subscribers=``, which reads
#: every one (a queue holding more, planted or real, is refused: name those to wait
#: for); with names, ``join()`` reads only those, whatever the queue holds.
JOINED_MOST = 1_000
#: Subscribers a call went to that join() names at most when refusing a name it never
#: went to.
_OTHERS_SHOWN = 20


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
    #: the subscribers whose lanes the pull was to wake, and those of them it could
    #: not (their wake lists were not declared to it: ``BroadcastStore.woken``)
    woken: Tuple[str, ...] = ()
    missed: Tuple[str, ...] = ()


class BroadcastStore(BroadcastReads):
    """The broadcast calls of one app's queues."""

    scripts = _SCRIPTS
    library = "broadcast_lib"

    def __init__(self, transport: Transport, app_name: str) -> None:
        super().__init__(transport, app_name)
        #: (queue, subscriber, or '' for a send) -> whose lanes its last call woke:
        #: the next declares their wake lists (a script touches only keys it is given)
        self._wakes: Dict[Tuple[str, str], Tuple[str, ...]] = {}

    def _common(self, queue: str) -> Tuple[str, ...]:
        k = self.keys(queue)
        parts = ("state", "log", "bodies", "sent", "cursors", "seen", "places", "since",
                 "alive")
        return tuple(k.broadcast(part) for part in parts)

    def send(self, queue: str, entries: Sequence[Tuple[str, bytes]], now_ms: int, *,
             maxlen: int, ttl_ms: int, durability: Optional[Durability] = None) -> int:
        """Add (id, body) calls to the queue's log for its subscribers; how many were new."""
        k = self.keys(queue)
        expected = self._wakes.get((queue, ""), ())
        wakes = self._wake_keys(queue, expected)
        tail: List[Any] = [*wakes, now_ms, maxlen, ttl_ms, WAKE_CAP, BATCH_LIMIT,
                           len(expected), *expected]
        for task_id, body in entries:
            tail += (task_id, body)
        added, woken, missed = self.transport.run_calls(
            [("broadcast_send", queue, (*self._common(queue), k.broadcast("names"),
                                        k.broadcast("joins")), tail, len(wakes))],
            f"send a broadcast to queue {queue!r}", durability)[0]
        self.woken(queue, "", _names(woken), _names(missed), int(added))
        return int(added)

    def _wake_keys(self, queue: str, names: Sequence[str]) -> List[str]:
        return [self.keys(lane(queue, name)).wake for name in names]

    def woken(self, queue: str, subscriber: str, woken: Sequence[str],
              missed: Sequence[str], tokens: int) -> None:
        """After a send (``subscriber`` '') or a pull of ``subscriber`` that was to
        wake the lanes of ``woken``: the next declares those, and the lanes of
        ``missed`` (not declared this time: the wake tree changed) are woken now."""
        if not woken:
            return
        self._wakes[(queue, subscriber)] = tuple(woken)
        if missed and tokens > 0:
            try:
                self.transport.run("broadcast_wake", self._wake_keys(queue, missed),
                                   (min(tokens, WAKE_CAP), WAKE_CAP),
                                   f"wake subscribers of queue {queue!r}")
            except BrokerError as exc:  # a hint: the send or pull itself is done
                logger.warning("could not wake %d subscriber(s) of queue %r (%s); each "
                               "pulls at its next wait's end, within 5 s", len(missed),
                               queue, exc)

    def pull_call(self, queue: str, subscriber: str, count: int, now_ms: Optional[int],
                  max_bytes: int = DEFAULT_MESSAGE_BYTES) -> ScriptCall:
        """A pull of up to ``count`` calls into the subscriber's lane (0: only re-arm
        the lane's wake when calls wait), to send with the lane's fetch; ``now_ms``
        None reads the server's clock (a pull sent behind a wait). A call whose body
        is longer than ``max_bytes`` (the worker's ``max_message_bytes``: no minitask
        wrote it) is measured, never read nor copied: the subscriber passes it by, and
        the pull's note says so, naming the key and the call."""
        own = self.keys(lane(queue, subscriber))
        now: Any = "server" if now_ms is None else now_ms
        expected = self._wakes.get((queue, subscriber), ()) if count > 0 else ()
        wakes = self._wake_keys(queue, expected)
        return ("broadcast_pull", lane(queue, subscriber),
                (*self._common(queue), own.messages, own.ready[0], own.wake),
                (*wakes, subscriber, count, now, WAKE_CAP, BATCH_LIMIT, max_bytes, *expected),
                len(wakes))

    @staticmethod
    def pulled(reply: Any) -> Pulled:
        pulled, skipped, more, note, *wakes = reply
        woken, missed = (*wakes, (), ())[:2]
        return Pulled(int(pulled), int(skipped), bool(int(more)),
                      text_of(note) or printable(note), _names(woken), _names(missed))

    def subscribe(self, queue: str, subscriber: str, now_ms: int,
                  notes: Optional[List[str]] = None) -> bool:
        """Subscribe ``subscriber`` to the queue's broadcasts from now on (an existing
        subscription keeps its place); True when it is new. Cursors of another type
        (data minitask did not write) refuse it: with ``notes`` (a worker's, which
        serves its other queues) the note saying so is added there and False
        returned; without, BrokerError."""
        what = f"subscribe {subscriber!r} to queue {queue!r}"
        reply = self.transport.run("broadcast_subscribe", self._common(queue),
                                   (subscriber, now_ms), what)
        if not isinstance(reply, (bytes, str)):
            return bool(reply)
        note = text_of(reply) or printable(reply)
        if notes is None:
            raise BrokerError(f"could not {what}: {note}", reason="wrong type")
        notes.append(note)
        return False

    def seen(self, queues: Sequence[str], subscriber: str, now_ms: int) -> List[str]:
        """Record that a worker of ``subscriber`` is alive, for each of ``queues`` (its
        ``alive`` on the server's clock: broadcast_alive.lua); the keys Redis refused
        (data minitask did not write), each with its error."""
        calls: List[ScriptCall] = [
            ("broadcast_alive", queue, (self.keys(queue).broadcast("seen"),
                                        self.keys(queue).broadcast("alive")),
             (subscriber, now_ms), 0) for queue in queues]
        replies = self.transport.run_calls(calls, f"say subscriber {subscriber!r} is alive")
        return [text_of(refused) or printable(refused) for reply in replies
                for refused in reply or ()]

    def unsubscribe(self, queue: str, subscriber: str) -> bool:
        """Remove a subscriber; False when it was not subscribed."""
        return bool(self.transport.run(
            "broadcast_unsubscribe", self._common(queue),
            (subscriber, BATCH_LIMIT), f"unsubscribe {subscriber!r} from queue {queue!r}"))

    def names(self, queue: str, call_id: str) -> Optional[List[str]]:
        """The subscribers a call was sent to (those subscribed before it and still
        subscribed; for a call an older minitask sent, the names it kept); None once
        that is no longer kept. A name minitask would not write is left out (logged)."""
        k = self.keys(queue)
        what = f"read the subscribers of broadcast {call_id}"
        joined = self._joined(queue, call_id, what)
        seq = self.score(k.broadcast("joins"), call_id, what)
        with self.transport.errors(what):
            if isinstance(joined, bytes):
                raws: List[Any] = [raw for raw in joined.split(b"\n") if raw]
            elif isinstance(seq, Exception) or _number(seq) is None:
                return None
            else:
                # one reading (join holds every name anyway): pages by offset would
                # skip names moved down by a prune or unsubscribe between two pages;
                # names longer than a subscriber's are counted, not sent
                keys = [k.broadcast(part) for part in ("since", "state", "cursors")]
                # since of another type (said once by page): an empty index, so
                # every cursor counts as subscribed before the call, as for cursors
                # an older minitask wrote (_indexed)
                scored = self.page(keys[0], "scored", 0, -1)[1] or []
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.hexists(keys[1], "indexed")
                pipe.hlen(keys[2])
                replies = pipe.execute(raise_on_error=False)
                index = scored[0::2]
                raws = [raw for raw, since in zip(index, scored[1::2])
                        if float(since) < (_number(seq) or 0)]
                if isinstance(replies[1], Exception):
                    other_type(keys[2])
                elif not self._indexed(keys[2], replies[0], replies[1], index):
                    # cursors of an older minitask not all indexed yet: subscribed
                    # before every call sent since, as the index will say once it has them
                    raws = list({*raws, *self._fields(keys[2])})
        found = []
        for raw in raws:
            name = name_of(raw, "subscriber")
            if name is None:
                ignored(k.broadcast("names" if joined else "since"),
                        f"{shown_member(raw)} is no subscriber name")
            else:
                found.append(name)
        return sorted(found)

    def _joined(self, queue: str, call_id: str, what: str) -> Any:
        """The names an older minitask kept for a call (``bcast:names``), measured first:
        None when there are none, or they are longer than NAMES_BYTES (not read, said)."""
        found = self.measured([(self.keys(queue).broadcast("names"), call_id, NAMES_BYTES)],
                              what)[0]
        return found if isinstance(found, bytes) else None

    def names_page(self, queue: str, call_id: str, most: int
                   ) -> Tuple[Optional[List[str]], int]:
        """At most ``most`` of the subscribers a call was sent to (as ``names``), the
        earliest subscribed first, and how many more: a bounded read of the since index
        (ZCOUNT, ZRANGEBYSCORE with a LIMIT). A call an older minitask sent, or cursors
        not all indexed yet, is read as ``names`` reads it, then cut. None once the
        call's record is no longer kept."""
        k = self.keys(queue)
        keys = [k.broadcast(part) for part in ("names", "joins", "state", "cursors", "since")]
        with self.transport.errors(f"read the subscribers of broadcast {call_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            for command, key, *args in (("hexists", keys[0], call_id), ("zscore", keys[1], call_id),
                                        ("hexists", keys[2], "indexed"), ("hlen", keys[3]),
                                        ("zcard", keys[4])):
                getattr(pipe, command)(key, *args)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
            joined, seq, flag, cursors, indexed = replies
            below = f"({_number(seq)}"
            if joined or _number(seq) is None or not flag \
                    or any(isinstance(r, Exception) for r in replies) or cursors > indexed:
                found = self.names(queue, call_id)  # an older minitask's data, as ever
                return (None, 0) if found is None else (found[:most], max(0, len(found) - most))
            count = self.transport.client.zcount(keys[4], "-inf", below)
        _, raws = self.page(keys[4], "below", _number(seq), most)
        raws = raws or []
        names = [name_of(raw, "subscriber") for raw in raws]
        for raw in (raw for raw, name in zip(raws, names) if name is None):
            ignored(keys[4], f"{shown_member(raw)} is no subscriber name")
        return sorted(name for name in names if name is not None), int(count) - len(raws)

    def sent_to(self, queue: str, call_id: str,
                among: Optional[Sequence[Any]] = None) -> List[str]:
        """Those of ``among`` (names as ``join`` was given them) the call was sent to,
        read by name (a ZSCORE and a cursor each): 200,000 planted subscribers made
        each ``join(subscribers=[...])`` read them all, blocking Redis 100-190 ms. A
        name that is no str is none of them (``join`` refuses it). Without ``among``,
        ``names`` (or the subscribers now, once the call's record is gone), for a
        queue of at most JOINED_MOST subscribers.

        Raises:
            ConfigurationError: no ``among``, and the queue has more subscribers than
                JOINED_MOST.
            BrokerError: Redis could not be reached, or a key holds another type.
        """
        if among is None:
            self._check_joinable(queue, call_id)
            names = self.names(queue, call_id)
            return [cursor.name for cursor in self.cursors(queue)] if names is None else names
        asked = sorted({name for name in among if isinstance(name, str)})
        if not asked:
            return []
        k = self.keys(queue)
        keys = [k.broadcast("names"), k.broadcast("joins"), k.broadcast("since"),
                k.broadcast("cursors")]
        what = f"read the subscribers of broadcast {call_id}"
        joined = self._joined(queue, call_id, what)
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(keys[1], call_id)
            for name in asked:
                pipe.zscore(keys[2], name)
            for name in asked:  # whether it has one: a cursor is not read (it may be huge)
                pipe.hexists(keys[3], name)
            seq, *replies = pipe.execute(raise_on_error=False)
        since, held = replies[:len(asked)], replies[len(asked):]
        cursors: Any = next((r for r in held if isinstance(r, Exception)), None) or [
            True if r else None for r in held]
        others: List[Any]
        if joined is not None:  # a call an older minitask sent
            kept: List[Any] = [raw for raw in joined.split(b"\n") if raw]
            found = [name for name in asked if name.encode() in set(kept)]
            others = kept[:_OTHERS_SHOWN]
        elif isinstance(seq, Exception) or _number(seq) is None:  # its record is gone
            found = [cursor.name for cursor in self.of(queue, asked)]
            others = [] if len(found) == len(asked) else [
                cursor.name for cursor in self.few(queue, _OTHERS_SHOWN)[0]]
        else:
            refused = next((at for at in since if isinstance(at, Exception)), None)
            if refused is not None:  # read as names() reads it: every cursor counts
                other_type(keys[2])
                since = [None] * len(asked)
            if isinstance(cursors, Exception):
                other_type(keys[3])
                cursors = [None] * len(asked)
            # subscribed before the call; or a cursor the index lacks (an older
            # minitask's, not indexed yet): subscribed before every call sent since, as
            # names() says
            found = [name for name, at, cursor in zip(asked, since, cursors)
                     if (at is not None and at < (_number(seq) or 0))
                     or (at is None and cursor is not None)]
            others = [] if len(found) == len(asked) else self._some_sent(keys[2], seq)
        if len(found) == len(asked):
            return found
        # a name it never went to: join() refuses it, saying whom it went to (a few)
        shown = (name_of(raw, "subscriber") for raw in others)
        return sorted({*found, *(name for name in shown if name is not None)})

    def _some_sent(self, since: str, seq: Any) -> List[Any]:
        """A few of the subscribers a call of sequence ``seq`` went to (a bounded read)."""
        return self.page(since, "below", _number(seq), _OTHERS_SHOWN)[1] or []

    def _check_joinable(self, queue: str, call_id: str) -> None:
        """ConfigurationError when the queue has more subscribers than JOINED_MOST."""
        k = self.keys(queue)
        with self.transport.errors(f"count the subscribers of queue {queue!r}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zcard(k.broadcast("since"))
            pipe.hlen(k.broadcast("cursors"))
            counts = [reply for reply in pipe.execute(raise_on_error=False)
                      if not isinstance(reply, Exception)]
        if counts and max(counts) > JOINED_MOST:
            raise ConfigurationError(
                f"join() on broadcast {call_id} of queue {queue!r}: the queue has "
                f"{max(counts):,} subscribers, more than join() reads without names "
                f"({JOINED_MOST:,}); name those to wait for with subscribers=[...]")

    def _indexed(self, key: str, flag: Any, count: Any, index: Sequence[Any]) -> bool:
        """Whether every cursor of hash ``key`` is in ``index`` (the since index, as
        read): a scan of the hash came back to its start (state's ``indexed``) and
        every cursor the hash holds is an index member. Counts alone cannot say it
        (nor can the flag): an index entry the hash lacks (an older minitask's
        unsubscribe) hides a cursor the index lacks, and that subscriber is never
        left out."""
        if isinstance(flag, Exception) or not flag or int(count or 0) > len(index):
            return False
        present = 0
        with self.transport.errors(f"read the cursors hash {key}"):
            for first in range(0, len(index), _PAGE):  # (HEXISTS: a cursor may be huge)
                pipe = self.transport.client.pipeline(transaction=False)
                for name in index[first:first + _PAGE]:
                    pipe.hexists(key, name)
                present += sum(bool(held) for held in pipe.execute())
        return present >= int(count or 0)

    def _fields(self, key: str) -> List[Any]:
        """Every field of hash ``key`` no longer than a name, a page at a time (HSCAN in
        broadcast_page.lua: values are not sent)."""
        fields: List[Any] = []
        at: Any = 0
        while True:
            at, page = self.page(key, "fields", at, PAGE)
            fields += page or []
            if page is None or int(at) == 0:
                return fields

    def log_size(self, queue: str) -> int:
        """Calls in the queue's log: some subscriber has not pulled them."""
        with self.transport.errors(f"count the broadcasts of queue {queue!r}"):
            return int(self.transport.client.zcard(self.keys(queue).broadcast("log")))


def _names(replies: Any) -> Tuple[str, ...]:
    """Subscriber names a script returned (read from bcast:since), but for one that can
    name no subscriber (another's data: no worker has its lane to wake)."""
    names = (name_of(raw, "subscriber") for raw in replies or ())
    return tuple(name for name in names if name is not None)


def _number(value: Any) -> Optional[int]:
    """A call sequence read back (a score, a field), or None: not one minitask wrote."""
    return whole(value, 0, _MAX_SEQ)
