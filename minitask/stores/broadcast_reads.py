"""Bounded reads of a broadcast queue's subscribers: how many names a read takes
(pages), and how long a value it takes (measured first).

Anyone with Redis access can plant data in a queue's broadcast keys: a cursors hash
of a million fields, a 50 MB value in ``bcast:seen``, ``bcast:cursors``,
``bcast:state`` or ``bcast:names``. Each was read whole by every ``minitask
status``, dashboard page, ``app.subscribers()`` and handle lookup. Here every value
is measured before it is read (hash_fields.lua: HSTRLEN, O(1)): one longer than
minitask writes there is never sent, said once in the log; and names are read a
page at a time (broadcast_page.lua), a name longer than any subscriber's removed
there, never sent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..broker.keys import MAX_NAME
from ..broker.transport import Transport
from ..printable import own_logger, printable
from .bounds import Ask, TooLarge, read_fields, too_large
from .foreign import (ignored, name_of, raise_refusals, removed_members, shown_member,
                      summarised, whole)
from .scripts import source
from .store import Store

logger = own_logger(__name__)

#: The longest value minitask writes in a field of state, cursors or seen: a whole
#: number below 2^53 (broadcast_lib.lua's FIELD_MOST).
FIELD_BYTES = 32
#: The longest list of names an older minitask kept for a call (``bcast:names``) that
#: a read reads: some 3,000 names of the longest kind, 50,000 host names.
NAMES_BYTES = 1_048_576
#: The most bytes of a subscriber name (a name's characters in UTF-8).
NAME_BYTES = 4 * MAX_NAME
#: Names read per round trip, and values measured per script.
PAGE = 500
#: Pages of removed members alone (none sent) ``few`` reads at most: a replica refuses
#: their removal, and the next page reads them again.
EMPTY_PAGES = 4
#: Subscribers ``cursors`` lists at most (``app.subscribers``), said when cut.
LISTED_MOST = 100_000
#: The highest call sequence a queue's log can hold (lib.lua's MAX_SCORE).
MAX_SEQ = 2534023007999999


class _Long:
    """A value measured longer than minitask writes there, and not read (said once)."""

    def __repr__(self) -> str:
        return "LONG"


#: What ``measured`` answers for a value longer than its bound.
LONG: Any = _Long()


@dataclass(frozen=True)
class Cursor:
    """Where one subscriber is in a queue's broadcast log."""

    name: str
    lag: int
    last_seen_ms: Optional[int]


class BroadcastReads(Store):
    """The listings of a queue's subscribers (``BroadcastStore``'s reads)."""

    def __init__(self, transport: Transport, app_name: str) -> None:
        super().__init__(transport, app_name)
        transport.register("hash_fields", source("hash_fields"))
        transport.register("broadcast_page", source("broadcast_page"))

    def measured(self, asks: Sequence[Ask], what: str) -> List[Any]:
        """Each asked field (key, field, most bytes): None when missing, LONG when longer
        than its bound (not read; said once: ``too_large``), an Exception for a key of
        another type; PAGE fields a script."""
        found: List[Any] = []
        for first in range(0, len(asks), PAGE):
            page = asks[first:first + PAGE]
            for (key, field, most), value in zip(page, read_fields(self.transport, page, what)):
                if isinstance(value, TooLarge):
                    too_large(key, field, value.length, most)
                    value = LONG
                found.append(value)
        return found

    def score(self, key: str, member: Any, what: str) -> Any:
        """ZSCORE of ``member`` in ``key``: its score, None, or Redis's refusal (an
        Exception: the key holds another type)."""
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(key, member)
            reply = pipe.execute(raise_on_error=False)
            raise_refusals(reply)
        return reply[0]

    def page(self, key: str, mode: str, start: Any, count: int) -> Tuple[Any, List[Any]]:
        """One page of names of ``key`` (broadcast_page.lua: ``mode`` 'fields' from
        HSCAN cursor ``start``, 'rank' from rank ``start``, 'below' under score
        ``start``): the next HSCAN cursor ('0': the end) and the names; None for a key of
        another type (said once). A member or field longer than any subscriber name is
        removed on the server, never sent, said once with its length."""
        at, names, _ = self._page(key, mode, start, count)
        return at, names  # type: ignore[return-value]

    def _page(self, key: str, mode: str, start: Any,
              count: int) -> Tuple[Any, Optional[List[Any]], int]:
        """``page``, and how many members it removed (or left, Redis refusing)."""
        stop = start + count - 1 if mode == "rank" else count
        reply = self.transport.run("broadcast_page", (key,),
                                   (mode, start, stop, NAME_BYTES, FIELD_BYTES),
                                   f"read subscribers in {printable(key)}")
        if reply[0] in (b"foreign", "foreign"):
            other_type(key)
            return 0, None, 0
        removed_members(key, reply[2], "subscriber name")
        return reply[0], list(reply[1]), len(reply[2] or ())

    def cursors(self, queue: str) -> List[Cursor]:
        """The queue's subscribers with how many calls each has not pulled, by name: the
        cursors hash a page at a time (HSCAN in broadcast_page.lua), each value measured;
        at most LISTED_MOST of them (a WARNING says how many more there are)."""
        key = self.keys(queue).broadcast("cursors")
        rows: Dict[str, Cursor] = {}
        at: Any = 0
        with summarised():
            while True:
                at, names = self.page(key, "fields", at, PAGE)
                for row in self.of(queue, names or []):
                    rows[row.name] = row
                if names is None or int(at) == 0:
                    break
                if len(rows) >= LISTED_MOST:
                    logger.warning("queue %s: listed %d subscriber(s) of %s and not the "
                                   "others (%d at most)", printable(queue), len(rows), key,
                                   LISTED_MOST)
                    break
        return sorted(rows.values(), key=lambda cursor: cursor.name)

    def few(self, queue: str, most: int) -> Tuple[List[Cursor], int]:
        """At most ``most`` of the queue's subscribers, the furthest behind first (by
        the index of cursors), and how many subscribe in all: bounded reads. A page's
        overlong members are removed there: the next page starts after the last name
        sent (Redis refusing the removal, a replica, a name may be read again: listed
        once), and at most EMPTY_PAGES pages of removed members alone are read."""
        k = self.keys(queue)
        raws: List[Any] = []
        seen: Set[Any] = set()
        start = empty = 0
        with summarised():
            while len(raws) < most and empty < EMPTY_PAGES:
                count = min(PAGE, most - len(raws))
                _, names, removed = self._page(k.broadcast("places"), "rank", start, count)
                if names is None:
                    break
                start += len(names)
                empty += 0 if names else 1
                raws += [name for name in names if name not in seen]
                seen.update(names)
                if len(names) + removed < count:  # fewer than asked there: the last page
                    break
            with self.transport.errors(f"count the subscribers of queue {queue!r}"):
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.hlen(k.broadcast("cursors"))
                held = pipe.execute(raise_on_error=False)
                raise_refusals(held)
        if isinstance(held[0], Exception):
            other_type(k.broadcast("cursors"))
        rows = self.of(queue, raws)
        return (sorted(rows, key=lambda c: (-c.lag, c.name)),
                0 if isinstance(held[0], Exception) else int(held[0] or 0))

    def of(self, queue: str, raws: Sequence[Any]) -> List[Cursor]:
        """The subscribers among ``raws`` (names as read or given) that subscribe: their
        cursors and seen times measured first (hash_fields.lua), PAGE names a script."""
        k = self.keys(queue)
        state, cursors, seen = (k.broadcast(part) for part in ("state", "cursors", "seen"))
        rows: List[Cursor] = []
        for first in range(0, len(raws), PAGE):
            names = list(raws[first:first + PAGE])
            asks = [(state, "seq", FIELD_BYTES), *((cursors, raw, FIELD_BYTES) for raw in names),
                    *((seen, raw, FIELD_BYTES) for raw in names)]
            found = self.measured(asks, f"read subscribers of queue {queue!r}")
            held, marks, times = found[0], found[1:1 + len(names)], found[1 + len(names):]
            if any(isinstance(mark, Exception) for mark in marks):
                other_type(cursors)
                return []
            stamps = {raw: None if isinstance(at, Exception) else at
                      for raw, at in zip(names, times)}
            # a cursor measured too long (LONG) is none: its subscriber is listed, from 0
            pairs = [(raw, mark) for raw, mark in zip(names, marks) if mark is not None]
            if isinstance(held, Exception):
                other_type(state)  # the last sequence unknown: no cursor judged by it
            rows += _rows(cursors, None if isinstance(held, Exception) else held, pairs, stamps,
                          not isinstance(held, Exception))
        return sorted(rows, key=lambda cursor: cursor.name)

    def passed(self, queue: str, call_id: str, names: Sequence[str]) -> List[str]:
        """Those of ``names`` that will not pull the call any more: their cursor is
        past it, or it left the log unpulled (all of them once it is forgotten)."""
        past, seq = self.cursor_past(queue, call_id, names)
        if past is None:  # forgotten: none will pull it
            return list(names)
        return self._placed_past(self.keys(queue).broadcast("places"), past, seq,
                                 f"read where the subscribers of broadcast {call_id} are")

    def cursor_past(self, queue: str, call_id: str,
                    names: Sequence[str]) -> Tuple[Optional[List[str]], Any]:
        """Those of ``names`` whose cursor is at or past the call, and its sequence (None,
        0: it left the log unpulled, or is forgotten). A key of another type among joins,
        state and cursors (data minitask did not write) is ignored, said once: where
        the subscribers are cannot be told, and none is taken as past the call (join()
        waits for each, as long as its timeout)."""
        if not names:
            return [], 0
        k = self.keys(queue)
        what = f"read where the subscribers of broadcast {call_id} are"
        keys = [k.broadcast(part) for part in ("joins", "state", "cursors")]
        seq = self.score(keys[0], call_id, what)
        asks = [(keys[1], "dropped", FIELD_BYTES),
                *((keys[2], name, FIELD_BYTES) for name in names)]
        dropped, *cursors = self.measured(asks, what)
        refused = next((cursor for cursor in cursors if isinstance(cursor, Exception)), None)
        for key, reply in zip(keys, [seq, dropped, refused]):
            if isinstance(reply, Exception):
                other_type(key)
        if isinstance(seq, Exception) or refused is not None:
            return [], 0
        if seq is None or seq <= (whole(dropped, 0, MAX_SEQ) or 0):
            return None, 0
        return [name for name, cursor in zip(names, cursors)
                if (whole(cursor, 0, MAX_SEQ) or 0) >= seq], seq

    def _placed_past(self, key: str, names: List[str], seq: int, what: str) -> List[str]:
        """Those of ``names`` (a cursor past call ``seq``) whose place in the index is
        not below it: set_cursor writes both, so a cursor past its place no pull wrote
        (planted), and the subscriber's next pull sets it back to its place and pulls
        the call. No place, or one that is no sequence (an older layout, another's
        data, a key of another type): the cursor is believed, as before."""
        if not names:
            return names
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            for name in names:
                pipe.zscore(key, name)
            places = pipe.execute(raise_on_error=False)
        kept = []
        for name, place in zip(names, places):
            at = None if isinstance(place, Exception) else whole(place, 0, MAX_SEQ)
            if at is None or at >= seq:
                kept.append(name)
        return kept


def _rows(key: str, seq: Any, pairs: Sequence[Tuple[Any, Any]],
          seen: Dict[Any, Any], known: bool = True) -> List[Cursor]:
    """Cursor rows; ``known`` False: the last sequence could not be read (state of
    another type), and a cursor is judged only as a sequence, its lag 0."""
    last = (whole(seq, 0, MAX_SEQ) or 0) if known else MAX_SEQ
    found = []
    for raw, cursor in pairs:
        name = name_of(raw, "subscriber")
        if name is None:
            ignored(key, f"{shown_member(raw)} is no subscriber name")
            continue
        at = whole(cursor, 0, last)
        if at is None and cursor is not LONG:  # (LONG: said as measured)
            ignored(key, f"the cursor {printable(cursor)!r} of {name!r} is no call "
                         f"sequence up to {last}")
        lag = max(0, last - (at or 0)) if known else 0
        found.append(Cursor(name, lag, whole(seen.get(raw), 0)))
    return found


def other_type(key: str) -> None:
    """Say once that ``key`` holds another type than minitask keeps there, and is read
    as empty (one line a key, whichever reader meets it first)."""
    ignored(key, "it holds another type than minitask keeps there; read as empty")
