"""Poisoned tasks whose burial failed: tried again after a growing wait, said seldom.

A fetch reports a poisoned task (its lease expired ``max_deliveries`` times) until it
is dead-lettered; it stays leased and expired meanwhile, so nothing is lost. A burial
that failed (Redis cut its reply, say) was tried again at the very next fetch, whose
next event was that expired lease: about 1,000 ERROR lines a second, a core busy, for
ever (probe35 M1). Its lease is now pushed ahead by a wait growing per failure (1 s,
2 s, ... 30 s): no fetch of any worker reports it before then, the other tasks are
served meanwhile, and the ERROR line is said at most once a minute per queue.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional

from ..errors import BrokerError
from ..log_throttle import LogThrottle
from ..printable import own_logger, shown_id
from .host import Host

logger = own_logger(__name__)

#: The first wait after a failed burial, and the longest (seconds).
FIRST_WAIT = 1.0
LONGEST_WAIT = 30.0
#: Seconds between two lines about failed burials in one queue, at least.
SAID_EVERY = 60.0
#: Task ids whose failures are counted at most (the least recent forgotten first).
REMEMBERED = 1024


class Burials:
    """Failed burials of poisoned tasks, counted per task id (a source's)."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._failures: "OrderedDict[str, int]" = OrderedDict()
        self._lock = threading.Lock()
        self._said = LogThrottle(SAID_EVERY, lock=threading.Lock())

    def buried(self, task_id: str) -> None:
        """The task is dead-lettered (or another fetch buried it): forgotten."""
        if self._failures:
            with self._lock:
                self._failures.pop(task_id, None)

    def failed(self, queue: str, task_id: str, error: BrokerError) -> float:
        """A burial failed: its lease is held back for the next wait (seconds, returned),
        and it is said, at most once a minute per queue."""
        with self._lock:
            count = self._failures.pop(task_id, 0) + 1
            self._failures[task_id] = count
            if len(self._failures) > REMEMBERED:
                self._failures.popitem(last=False)
        wait = min(LONGEST_WAIT, FIRST_WAIT * float(2 ** min(count - 1, 16)))
        held: Optional[BrokerError] = None
        try:
            self._host.broker.queues.hold_back(
                queue, task_id, self._host.clock.now_ms() + int(wait * 1000))
        except BrokerError as exc:  # the next fetch reports it again: tried again then
            held = exc
        times = self._said.note(queue)
        if times:
            logger.error(
                "could not dead-letter poisoned task %s of queue %r (%s); %s (%d failed "
                "burial(s) in this queue since the last such line, at most one a minute)",
                shown_id(task_id), queue, error,
                f"tried again in {wait:.0f} s" if held is None else
                f"tried again at the next fetch (its lease could not be held back: {held})",
                times)
        return wait
