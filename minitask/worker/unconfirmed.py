"""Outcome writes replicas did not confirm in time (``durability``), said once an outage.

With a replica stopped, every outcome a worker records is made on the primary and
left unconfirmed: the worker logged one ERROR for each while ``minitask status``
said nothing. Now the first of an outage is one ERROR naming the write; the next are
counted, and said in one WARNING at most every ``SUMMARY_EVERY`` seconds ("N more
... in the last M s"); the first write replicas confirm again ends the outage with one
WARNING summing it up. The outage's count, and when its last write was left
unconfirmed, go with the worker's heartbeat (``control.register``) for ``minitask
status``. A process pool's children count in memory their supervisor shares
(``share``): one ERROR for the worker, its heartbeat the sum of theirs.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import threading
import time
from typing import Any, Dict

from ..printable import own_logger

logger = own_logger("minitask.worker.outages")  # (where these lines always came from)

#: Least time between two warnings counting the writes left unconfirmed (s).
SUMMARY_EVERY = 60.0
# the state's slots: writes of the outage, of them said, when it began, its last write,
# when it was last said (time.monotonic(): one clock for every process of the machine)
_COUNT, _SAID, _FIRST, _LAST, _SAID_AT = range(5)


class UnconfirmedWrites:
    """This worker's writes left unconfirmed by replicas, by outage."""

    def __init__(self) -> None:
        self._state: Any = [0.0] * 5
        self._lock: Any = threading.Lock()
        #: This process saw a write left unconfirmed and no confirmed one since: read
        #: (an attribute, no call) by each outcome write that replicas confirmed.
        self.pending = False

    def share(self) -> None:
        """In a process pool's supervisor, before it forks: its children count in memory
        they inherit (made once), so that the worker says each outage once."""
        if isinstance(self._state, list):
            shared = multiprocessing.Array(ctypes.c_double, 5)
            self._state, self._lock = shared, shared.get_lock()

    def seen(self, what: str, exc: BaseException) -> None:
        """Write ``what`` was made on the primary, not confirmed in time (``exc``)."""
        now = time.monotonic()
        self.pending = True
        with self._lock:
            state = self._state
            first = state[_COUNT] == 0
            state[_COUNT] += 1
            state[_LAST] = now
            if first:
                state[_FIRST] = state[_SAID_AT] = now
                state[_SAID] = 1
        if first:
            logger.error("Redis wrote but replicas did not confirm it in time: %s (%s); a "
                         "failover may lose it, and the task then runs again. Further writes "
                         "left unconfirmed are counted (said at most once a minute, and by "
                         "minitask status) until replicas confirm one again", what, exc)
        else:
            self.tick()

    def confirmed(self) -> None:
        """A write of this process was confirmed: the outage, if any, is over (said)."""
        self.pending = False
        now = time.monotonic()
        with self._lock:
            state = self._state
            count, span = int(state[_COUNT]), now - state[_FIRST]
            for slot in range(5):
                state[slot] = 0.0
        if count:
            logger.warning("replicas confirm this worker's writes again: %d outcome write(s) "
                           "were left unconfirmed by them over the last %.0f s (a failover "
                           "then may have lost them; their tasks then run again)", count, span)

    def stopped(self) -> None:
        """The worker stops: the outage going on, if any, is summed up, and this
        process's count starts afresh (a next worker in it has its own outages)."""
        self.pending = False
        now = time.monotonic()
        with self._lock:
            state = self._state
            count, more, span = (int(state[_COUNT]), int(state[_COUNT] - state[_SAID]),
                                 now - state[_FIRST])
            for slot in range(5):
                state[slot] = 0.0
        if count:
            logger.warning("the worker stops with %d outcome write(s) left unconfirmed by "
                           "replicas over the last %.0f s (%d not said before): a failover "
                           "may lose them, and their tasks then run again", count, span, more)

    def tick(self) -> None:
        """Say the writes left unconfirmed since last said, once ``SUMMARY_EVERY`` has
        passed (each such write, and each heartbeat, asks)."""
        now = time.monotonic()
        with self._lock:
            state = self._state
            more, since = int(state[_COUNT] - state[_SAID]), now - state[_SAID_AT]
            due = state[_COUNT] > 0 and more > 0 and since >= SUMMARY_EVERY
            if due:
                state[_SAID], state[_SAID_AT] = state[_COUNT], now
            total, outage = int(state[_COUNT]), now - state[_FIRST]
        if due:
            logger.warning("%d more outcome write(s) left unconfirmed by replicas in the last "
                           "%.0f s (%d since this began %.0f s ago): a replica is down or "
                           "behind; a failover may lose them, and their tasks then run again",
                           more, since, total, outage)

    def heartbeat(self, now_ms: int) -> Dict[str, int]:
        """The heartbeat's fields: the outage's count of writes, and when its last one
        was left unconfirmed (ms, the worker's clock); 0 and 0 outside an outage (the
        record's fields are overwritten, never removed)."""
        self.tick()
        with self._lock:
            count, last = int(self._state[_COUNT]), self._state[_LAST]
        return {"unconfirmed": count, "unconfirmed_ms": now_ms - int(
            (time.monotonic() - last) * 1000) if count else 0}


#: The process's (a worker's, or a process pool's with its children).
WRITES = UnconfirmedWrites()
