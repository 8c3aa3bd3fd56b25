"""A pool's fixed number of slots: the dispatcher takes one before it fetches, and the
pool gives it back when the job ends, so that a worker never leases more than it runs."""
from __future__ import annotations

import threading
from typing import Callable, Optional


class FixedSlots:
    """``size`` slots; ``on_free`` hears how many were free as one is taken (the asyncio
    pool leases that many tasks in one round trip)."""

    def __init__(self, size: int, on_free: Optional[Callable[[int], None]] = None) -> None:
        self._size = size
        self._busy = 0
        self._finished = 0
        # a plain lock under the condition: ``ran_one`` (every task) takes it directly,
        # with no Python-level enter and exit of the condition's own
        self._slots_lock = threading.Lock()
        self._idle = threading.Condition(self._slots_lock)
        self._on_free = on_free

    def wait_for_slot(self, stop: threading.Event) -> bool:
        """Take a free slot; False when ``stop`` is set first."""
        with self._idle:
            while self._busy >= self._size and not stop.is_set():
                self._idle.wait(0.2)  # the stop sets no condition: looked at 5 times a second
            if stop.is_set():
                return False
            free = self._size - self._busy
            self._busy += 1
        if self._on_free is not None:
            self._on_free(free)
        return True

    def give_back_slot(self, finished: bool = False) -> None:
        with self._idle:
            self._busy -= 1
            self._finished += finished
            self._idle.notify_all()

    def ran_one(self) -> None:
        """A job ran to its end; its slot stays taken (its thread goes on with another).
        Nobody waiting for a slot or for idleness is woken: neither came."""
        with self._slots_lock:
            self._finished += 1

    @property
    def finished(self) -> int:
        """Jobs run to the end so far: a change means new work may have been scheduled."""
        with self._slots_lock:
            return self._finished

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Wait until no job runs; False when ``timeout`` seconds pass first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)
