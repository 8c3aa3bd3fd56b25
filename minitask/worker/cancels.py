"""Stopping running attempts on request: the board of attempts, and the watch.

``handle.cancel(running=True)`` posts the task id to its queue's ``cancels``
stream. The watch (a thread per worker process, per cluster slot) blocks on
those streams with XREAD, so a request is heard within a round trip, with no
polling; an idle worker makes one call per 5 s for it. The board knows which
attempts this process runs and how its pool stops one: the event behind
``current_task().cancel_requested`` is always set; the asyncio pool also
cancels the coroutine, and a process pool child asks its supervisor to kill it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Set

from ..errors import BrokerError
from ..printable import log_error, own_logger
from ..stores.foreign import foreign
from .host import Host
from .leases import Holdings
from .outages import Backoff

logger = own_logger(__name__)

#: Longest the end of the watch waits for its threads (one XREAD at most).
MAX_WAIT = 6.0
#: Longest ``CancelWatch.start`` waits for its threads' first look at where the streams
#: end (one round trip; an outage does not hold the start: the look fails at once).
FIRST_LOOK_WAIT = MAX_WAIT

#: How a pool stops an attempt it runs, called from the watch's thread.
Stopper = Callable[[], object]


class _StopEvent(threading.Event):
    """A threading.Event whose condition is made on the first ``set``, ``clear`` or
    ``wait``: nearly every attempt is never asked to stop, and a plain Event (a lock
    and a condition) cost 4 us of the 60-70 us a worker spends per task."""

    _making = threading.Lock()

    def __init__(self) -> None:  # Event's own __init__ makes the condition deferred here
        self._flag = False
        self._cond: Optional[threading.Condition] = None

    def _condition(self) -> threading.Condition:
        if self._cond is None:
            with _StopEvent._making:
                if self._cond is None:
                    self._cond = threading.Condition(threading.Lock())
        return self._cond

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        condition = self._condition()
        with condition:
            self._flag = True
            condition.notify_all()

    def clear(self) -> None:
        with self._condition():
            self._flag = False

    def wait(self, timeout: Optional[float] = None) -> bool:
        condition = self._condition()
        with condition:
            return self._flag or condition.wait(timeout)


class _Attempt:
    def __init__(self, stopper: Optional[Stopper]) -> None:
        self.event: threading.Event = _StopEvent()
        self.stopper = stopper


class CancelBoard:
    """The attempts running in this process, by task id, and the stops asked of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Dict[str, _Attempt] = {}
        # Held (prefetched) tasks asked to stop before they started: they never run.
        self._early: Set[str] = set()

    def enter(self, task_id: str, stopper: Optional[Stopper] = None) -> threading.Event:
        """An attempt starts; the event it gets is set when a stop is asked (at once,
        if it was asked while the task waited in this worker's buffer)."""
        attempt = _Attempt(stopper)
        with self._lock:
            self._running[task_id] = attempt
            if task_id in self._early:
                self._early.discard(task_id)
                attempt.event.set()
        return attempt.event

    def set_stopper(self, task_id: str, stopper: Stopper) -> bool:
        """Say how to stop an attempt that has started; False if a stop was asked
        already (the caller stops it itself)."""
        with self._lock:
            attempt = self._running.get(task_id)
            if attempt is None or attempt.event.is_set():
                return False
            attempt.stopper = stopper
            return True

    def leave(self, task_id: str, event: Optional[threading.Event] = None) -> None:
        """An attempt ended; ``event``: the one ``enter`` gave it. Another attempt of
        the same task (its retry, begun on another slot as this one ended) keeps its
        own entry: taken out, its stopper was lost and its coroutine cancelled."""
        with self._lock:
            attempt = self._running.get(task_id)
            if attempt is not None and (event is None or attempt.event is event):
                del self._running[task_id]

    def request(self, task_id: str, held: bool) -> bool:
        """A stop was asked for ``task_id``; True if it runs here. ``held``: this
        worker holds its lease (a prefetched task, not started yet)."""
        with self._lock:
            attempt = self._running.get(task_id)
            if attempt is None:
                if held:
                    self._early.add(task_id)
                return False
            already = attempt.event.is_set()
            attempt.event.set()
            stopper = attempt.stopper
        if stopper is not None and not already:
            stopper()
        return True

    def forget_early(self, keep: Set[str]) -> None:
        """Drop early requests of tasks no longer held (given back at a stop)."""
        with self._lock:
            self._early &= keep


class CancelWatch:
    """Threads that block on the queues' cancel streams and tell the board."""

    def __init__(self, host: Host, queues: List[str], board: CancelBoard,
                 holdings: Holdings, stop: threading.Event) -> None:
        self._host = host
        self._queues = queues
        self._board = board
        self._holdings = holdings
        self._stop = stop
        self._threads: List[threading.Thread] = []

    def start(self) -> None:
        """One daemon thread per group of streams one XREAD can wait on; ``end``
        stops them. Returns once each has read where its streams end (bounded by
        FIRST_LOOK_WAIT): a request is heard only if posted after that look, and the
        worker leases its first task after this returns. Started in the background
        alone, a watch starved on a loaded machine looked after a task had started and
        been asked to stop: that request was behind it, and never heard."""
        looked: List[threading.Event] = []
        for index, group in enumerate(self._host.broker.cancels.groups(self._queues)):
            looked.append(threading.Event())
            thread = threading.Thread(target=self._loop, args=(group, looked[-1]),
                                      daemon=True, name=f"minitask-cancel-watch-{index}")
            thread.start()
            self._threads.append(thread)
        deadline = time.monotonic() + FIRST_LOOK_WAIT
        for event in looked:
            if not event.wait(max(0.0, deadline - time.monotonic())):
                logger.debug("the cancel watch has not read where its streams end within "
                             "%s s; the worker starts all the same", FIRST_LOOK_WAIT)
                break

    def end(self) -> None:
        """Once the worker has stopped: wake the threads (blocked in XREAD) and wait
        for them, so that none outlives ``run()``. Other workers skip the wake-up."""
        if not self._threads:
            return
        try:
            self._host.broker.cancels.wake(
                [group[0] for group in self._host.broker.cancels.groups(self._queues)])
        except BrokerError as exc:
            logger.debug("could not wake the cancel watch (%s); it ends within 5 s", exc)
        for thread in self._threads:
            thread.join(timeout=MAX_WAIT)
        self._threads.clear()

    def _loop(self, queues: List[str], looked: threading.Event) -> None:
        """Watch ``queues``' streams until the worker stops; ``looked`` is set once the
        first look at where they end is over (read, or failed: an outage's backoff
        must not hold the worker's start)."""
        backoff = Backoff("wait for cancel requests")
        store = self._host.broker.cancels
        positions: Dict[str, str] = {}
        seen: Dict[str, str] = {}  # where each queue was read to, left out since or not
        look_again = 0.0  # when to read the positions of the queues left out
        try:
            while not self._stop.is_set():
                try:
                    if len(positions) < len(queues) and time.monotonic() >= look_again:
                        # a stream of another type is left out (said once, naming it),
                        # looked at again every MAX_WAIT s: fixed, it is watched again
                        try:
                            positions.update(store.positions(
                                [queue for queue in queues if queue not in positions], seen))
                        finally:
                            looked.set()
                        look_again = time.monotonic() + MAX_WAIT
                    if not positions:  # every stream holds another type: look again later
                        looked.set()
                        self._stop.wait(MAX_WAIT)
                        continue
                    requests = store.watch(positions, timeout=_watch_timeout(
                        len(positions) < len(queues), look_again))
                    seen.update(positions)
                except BrokerError as exc:
                    if self._stop.is_set():
                        return  # the worker closed its connections as it stopped
                    if foreign(exc):  # a stream turned into another type: data, not an
                        positions = {}  # outage; reading them again leaves it out, named
                        look_again = 0.0
                        continue
                    self._stop.wait(backoff.failed(exc))
                    continue
                except Exception as exc:  # a bug of ours must not end the watch
                    log_error(logger, logging.ERROR, "internal error while waiting for cancel "
                              "requests", error=exc)
                    self._stop.wait(1.0)
                    continue
                backoff.succeeded()
                if requests:
                    held = {task_id for task_id, _ in self._holdings.held()}
                    for _, _, task_id in requests:
                        if self._board.request(task_id, task_id in held):
                            logger.info("task %s: stop requested (cancel(running=True))",
                                        task_id, extra={"task_id": task_id, "task_name": ""})
                    self._board.forget_early(held)
        finally:
            looked.set()  # (stopped before its first look)
            backoff.gave_up()  # it no longer rides an outage


def _watch_timeout(some_left_out: bool, look_again: float) -> float:
    """How long one wait for requests blocks at most: until the queues left out are
    looked at again, if any are (the store caps it at its longest wait)."""
    return max(0.001, look_again - time.monotonic()) if some_left_out else MAX_WAIT
