"""The heartbeat: the thread that renews a worker's leases while it holds any, and
records the outcomes a batch let wait too long; it backs off while Redis is away,
never past its period (a lease must not lapse behind a long backoff)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Protocol

from ..errors import BrokerError
from .outages import Backoff


class Batched(Protocol):
    """Outcomes recorded in batches, which the heartbeat records if they wait too long."""

    def flush_due_at(self) -> Optional[float]: ...

    def flush_if_overdue(self) -> None: ...


class Heartbeat:
    """The thread that renews leases until the worker holds none."""

    def __init__(self) -> None:
        # Leases are renewed until every running task has ended or been given back,
        # which is after a stop: the grace is time a live worker still holds its tasks.
        self._ended = threading.Event()
        # Wakes the heartbeat thread early: a stop, or outcomes waiting to be recorded.
        self._nudge = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def nudge(self) -> None:
        self._nudge.set()

    def start(self, period: float, beat: Callable[[], None], batched: Batched,
              stop: threading.Event, on_stop: Callable[[], None]) -> None:
        """Every ``period`` seconds, ``beat``; record outcomes ``batched`` lets wait
        too long; once ``stop`` is set, call ``on_stop`` once."""
        self._thread = threading.Thread(target=self._loop, name="minitask-heartbeat",
                                        args=(period, beat, batched, stop, on_stop),
                                        daemon=True)
        self._thread.start()

    def end(self) -> None:
        """Once no task is held any more: end the heartbeat thread, and wait for it."""
        self._ended.set()
        self._nudge.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self, period: float, beat: Callable[[], None], batched: Batched,
              stop: threading.Event, on_stop: Callable[[], None]) -> None:
        """Renew leases until the worker holds none; record outcomes a child let wait.

        It goes on through a stop: a task let finish within the grace is still
        this live worker's, and its lease must not lapse meanwhile.
        """
        backoff = Backoff("renew leases")
        next_beat = time.monotonic() + period
        stopping = False
        try:
            while not self._ended.is_set():
                wake = next_beat
                due = batched.flush_due_at()
                if due is not None:
                    wake = min(wake, due)
                self._nudge.wait(max(0.0, wake - time.monotonic()))
                self._nudge.clear()
                if self._ended.is_set():
                    break
                if stop.is_set() and not stopping:
                    stopping = True
                    on_stop()
                failed: Optional[BrokerError] = None
                try:  # an outcome refused (the ACL) must not stop the leases' renewal
                    batched.flush_if_overdue()
                except BrokerError as exc:
                    failed = exc
                try:
                    if time.monotonic() >= next_beat:
                        next_beat = time.monotonic() + period
                        beat()
                except BrokerError as exc:
                    failed = failed or exc
                if failed is not None:  # no busy loop while Redis is away, no pause past a period
                    self._ended.wait(min(backoff.failed(failed), period))
                else:
                    backoff.succeeded()
        finally:
            backoff.gave_up()  # it no longer rides an outage
