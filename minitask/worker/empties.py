"""The queues a worker found empty, which its walk skips until work may have come.

A worker serves its queues in order: one is served only while every queue before
it is empty. Fetching each in turn before each task made a worker of 600 queues,
most of them empty, drain a few tasks a second. A fetch that leases nothing now
marks its queue empty until the next event it found (a delayed task due, a lease
expiring, a limit freeing), ``RECHECK_MS`` at most. Before a walk skips marked
queues, one EXISTS looks at their wake lists: every write that makes a task ready
(or a delayed one the first due) pushes a token there, and the fetch that empties
a queue deletes the list, so a list that holds a token is a queue to fetch again.
A token this worker's own wait took off a list clears its queue's mark too.

``RECHECK_MS`` bounds what a lost token costs (popped by a waiter as it was cut
off): a marked queue is fetched again within it, as an idle worker's wait ends
within ``broker.waits.MAX_BLOCK_SECONDS`` at most.
"""
from __future__ import annotations

import threading
from typing import Dict, FrozenSet, Optional, Sequence, Tuple

from ..errors import BrokerError
from ..printable import own_logger
from ..stores.queue import FetchResult, QueueStore

logger = own_logger(__name__)

#: Longest a queue stays marked empty without a fetch, in ms.
RECHECK_MS = 5000


class _View:
    """The marks as one walk reads them, made again only when a mark changes or the
    first of them runs out: a worker of 600 queues asks before every task."""

    def __init__(self, version: int, marks: Dict[str, Tuple[int, Optional[int]]],
                 now_ms: int) -> None:
        self.version = version
        live = {queue: mark for queue, mark in marks.items() if mark[0] > now_ms}
        #: The queues marked (in no order: Redis is asked about them all at once).
        self.marked = tuple(live)
        self.skip = frozenset(live)
        #: When the first mark runs out: the view is made again then (ms).
        self.until = min((mark[0] for mark in live.values()), default=None)
        events = [mark[1] for mark in live.values() if mark[1] is not None]
        #: The earliest next event of the queues marked (ms), if any.
        self.upcoming = min(events) if events else None


class EmptyQueues:
    """The marks of the queues one worker found empty, shared by its threads."""

    def __init__(self, store: QueueStore) -> None:
        self._store = store
        #: queue -> (ms until which it is skipped, its next event in ms or None)
        self._marks: Dict[str, Tuple[int, Optional[int]]] = {}
        self._lock = threading.Lock()
        #: Counts tokens taken by this worker's waits: a fetch sent before one was
        #: taken marks nothing (the token's queue may have work its fetch missed).
        self.epoch = 0
        self._version = 0  # counts changes of the marks
        self._view: Optional[_View] = None

    def found(self, queue: str, result: FetchResult, now_ms: int, epoch: int) -> None:
        """Mark ``queue`` empty after a fetch (sent at ``epoch``, at ``now_ms``) that
        leased nothing and found nothing due; clear its mark after any other."""
        upcoming = result.next_event_ms
        if (result.deliveries or result.poisoned or result.expired
                or (upcoming is not None and upcoming <= now_ms)):
            if queue in self._marks:
                self.forget([queue])
            return
        until = now_ms + RECHECK_MS
        if upcoming is not None and upcoming < until:
            until = upcoming
        with self._lock:
            if epoch == self.epoch and self._marks.get(queue) != (until, upcoming):
                self._marks[queue] = (until, upcoming)
                self._version += 1

    def any_marked(self) -> bool:
        """Whether any queue is marked (cheap: no clock, no round trip)."""
        return bool(self._marks)

    def marked(self, queue: str, now_ms: int) -> bool:
        """Whether ``queue`` is marked empty at ``now_ms`` (its wake list not looked at)."""
        mark = self._marks.get(queue)
        return mark is not None and mark[0] > now_ms

    def skipped(self, now_ms: int) -> FrozenSet[str]:
        """The queues to skip now: marked, their wake lists empty (one round trip)."""
        view = self._current(now_ms)
        if view is None:
            return frozenset()
        try:
            woken = self._store.woken(view.marked)
        except BrokerError as exc:  # each queue's own fetch meets it, or serves it
            logger.debug("could not look for new tasks (%s): the queues are fetched", exc)
            self.forget(view.marked)
            return frozenset()
        if not woken:
            return view.skip
        self.forget(woken)
        return view.skip.difference(woken)

    def upcoming(self, now_ms: int) -> Optional[int]:
        """The earliest next event of the queues marked (ms), if any: a wait ends then."""
        view = self._current(now_ms)
        return None if view is None else view.upcoming

    def _current(self, now_ms: int) -> Optional[_View]:
        """The marks as they stand at ``now_ms`` (None when none is)."""
        if not self._marks:
            return None
        view = self._view
        if view is None or view.version != self._version or (
                view.until is not None and view.until <= now_ms):
            with self._lock:
                view = self._view = _View(self._version, self._marks, now_ms)
        return view if view.marked else None

    def took_tokens(self) -> None:
        """Clear the marks of the queues whose tokens this thread's waits took."""
        keys = self._store.tokens_taken()
        if not keys:
            return
        wakes = set(keys)
        with self._lock:
            self.epoch += 1
            for queue in list(self._marks):
                if self._store.keys(queue).wake in wakes:
                    del self._marks[queue]
                    self._version += 1

    def forget(self, queues: Sequence[str]) -> None:
        """Clear the marks of ``queues``: the next walk fetches them."""
        with self._lock:
            for queue in queues:
                if self._marks.pop(queue, None) is not None:
                    self._version += 1
