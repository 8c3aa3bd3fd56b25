"""Outcome writes replicas did not confirm in time (``durability``), said once an outage.

With a replica stopped, every outcome a worker records is made on the primary and
left unconfirmed: the worker logged one ERROR for each while ``minitask status``
said nothing. Now the first of an outage is one ERROR naming the write; the next are
counted, and said in one WARNING at most every ``SUMMARY_EVERY`` seconds ("N more
... in the last M s"); the first write replicas confirm again ends the outage with one
WARNING summing it up. The outage's count, and when its last write was left
unconfirmed, go with the worker's heartbeat (``control.register``) for ``minitask
status``. A process pool's children count in memory their supervisor shares
(``share``): one ERROR for the worker, its heartbeat the sum of theirs, and any
process's confirmed write ends the outage (the child that saw it may be gone).

No lock guards the count: a child is killed at any instruction (its time limit, a
cancel, the grace over, the OOM killer), and one killed holding a lock shared with
its supervisor left it held for ever (the heartbeat and the stop then blocked on it).
Each slot is one aligned double, written whole; two processes writing at once may
lose a count, or both say an outage's first write: an approximate count is enough
for a log summary and ``minitask status``.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import time
from typing import Any, Callable, Dict, Tuple

from ..log_throttle import LogThrottle
from ..printable import own_logger

logger = own_logger("minitask.worker.outages")  # (where these lines always came from)

#: Least time between two warnings counting the writes left unconfirmed (s).
SUMMARY_EVERY = 60.0
# the state's slots (time.monotonic(): one clock for every process of the machine)
_COUNT, _FIRST, _LAST = range(3)  # writes of the outage, when it began, its last write


class UnconfirmedWrites:
    """This worker's writes left unconfirmed by replicas, by outage."""

    def __init__(self) -> None:
        #: The outage's slots (``_COUNT``...): a list, or a process pool's shared
        #: array (``share``). ``state[0]``, the count, is read (an index, no call) by
        #: each outcome write that replicas confirmed: above 0, it ends the outage.
        self.state: Any = [0.0] * 3
        self._said = LogThrottle(SUMMARY_EVERY)  # writes said, and since (shared as state)

    @property
    def pending(self) -> bool:
        """An outage of unconfirmed writes goes on (in any process of the worker)."""
        return bool(self.state[_COUNT])

    def share(self) -> None:
        """In a process pool's supervisor, before it forks: its children count in memory
        they inherit (made once, with no lock: see the module's docstring), so that the
        worker says each outage once, and any of them ends it."""
        if isinstance(self.state, list):
            self.state = multiprocessing.RawArray(ctypes.c_double, 3)
            said: Any = multiprocessing.RawArray(ctypes.c_double, 3)
            self._said = LogThrottle(SUMMARY_EVERY, slots=lambda: said)

    def seen(self, what: str, exc: BaseException) -> None:
        """Write ``what`` was made on the primary, not confirmed in time (``exc``)."""
        now, state = time.monotonic(), self.state
        first = state[_COUNT] == 0
        if first:  # its start first: a heartbeat reading the count then reads them too
            state[_FIRST] = now
            self._said.note()  # (said below: the first summary is a minute away)
        state[_LAST] = now
        state[_COUNT] += 1
        if first:
            logger.error("Redis wrote but replicas did not confirm it in time: %s (%s); a "
                         "failover may lose it, and the task then runs again. Further writes "
                         "left unconfirmed are counted (said at most once a minute, and by "
                         "minitask status) until replicas confirm one again", what, exc)
        else:
            self.tick(1)

    def _ended(self) -> Tuple[int, int, float]:
        """The outage's count, of them not said, and its length (s); then none (the
        count alone set: an outage's first write sets the other slots)."""
        count, first = int(self.state[_COUNT]), self.state[_FIRST]
        self.state[_COUNT] = 0.0
        return count, self._said.forget(), time.monotonic() - first

    def confirmed(self) -> None:
        """A write of the worker was confirmed: the outage, if any, is over (said)."""
        count, _, span = self._ended()
        if count:
            logger.warning("replicas confirm this worker's writes again: %d outcome write(s) "
                           "were left unconfirmed by them over the last %.0f s (a failover "
                           "then may have lost them; their tasks then run again)", count, span)

    def stopped(self, caught_up: Callable[[], bool] = lambda: False) -> None:
        """The worker stops: the outage going on, if any, is summed up, and this
        process's count starts afresh (a next worker in it has its own outages).
        Replicas are asked first (``caught_up``) whether they have every write now:
        a replica back since the outage's last write has them all, though no write
        of the worker was confirmed since to end it; then the outage is said ended
        (``confirmed``), not left unconfirmed."""
        if self.state[_COUNT] and caught_up():
            self.confirmed()
            return
        count, more, span = self._ended()
        if count:
            logger.warning("the worker stops with %d outcome write(s) left unconfirmed by "
                           "replicas over the last %.0f s (%d not said before): a failover "
                           "may lose them, and their tasks then run again", count, span, more)

    def refresh(self, caught_up: Callable[[], bool]) -> None:
        """Before a heartbeat: while an outage goes on, replicas are asked whether they
        have every write now (``caught_up``); a replica back since the outage's last
        write has them all, though no write of the worker was confirmed since, and the
        outage is then said ended (``confirmed``): ``minitask status`` stops counting
        writes a replica holds (it went on showing them until the worker's next
        confirmed write, or its stop)."""
        if self.state[_COUNT] and caught_up():
            self.confirmed()

    def tick(self, count: int = 0) -> None:
        """Say the writes left unconfirmed since last said (``count`` more now), once
        ``SUMMARY_EVERY`` has passed (each such write, and each heartbeat, asks)."""
        since, more = self._said.since(), self._said.note(None, count)
        if more:
            logger.warning("%d more outcome write(s) left unconfirmed by replicas in the last "
                           "%.0f s (%d since this began %.0f s ago): a replica is down or "
                           "behind; a failover may lose them, and their tasks then run again",
                           more, since, int(self.state[_COUNT]),
                           time.monotonic() - self.state[_FIRST])

    def heartbeat(self, now_ms: int) -> Dict[str, int]:
        """The heartbeat's fields: the outage's count of writes, and when its last one
        was left unconfirmed (ms, the worker's clock); 0 and 0 outside an outage (the
        record's fields are overwritten, never removed)."""
        self.tick()
        count, last = int(self.state[_COUNT]), self.state[_LAST]
        return {"unconfirmed": count, "unconfirmed_ms": now_ms - int(
            (time.monotonic() - last) * 1000) if count else 0}


#: The process's (a worker's, or a process pool's with its children).
WRITES = UnconfirmedWrites()
