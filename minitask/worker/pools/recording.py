"""The asyncio pool's recording threads: the steps of its attempts that wait for Redis
(an outcome recorded with the next fetch) run in a few threads beside the event loop,
never on it; the loop awaits each step as a future.

Each step is a hop off the loop and one back (a thread woken, then the loop):
the pool's main cost per task beside the thread pool's, so there are no more
threads than steps can be in flight at once (a slot has one at a time). A step
that waits for Redis (``persist`` backing off: an outage, a write the ACL refuses
for up to ``visibility_timeout``) has a spare thread started in its place, up to
one a slot, so that the other slots' outcomes are never held behind it; a spare
ends once the step it stood in for has.
"""
from __future__ import annotations

import asyncio
import logging
import queue as _queue
import threading
from typing import Any, Callable, List, Optional, Tuple

from ...printable import log_error, own_logger
from ..forks import FORK_MARK, PID_SEEN, current_pid, leave
from ..outages import waiting_in

logger = own_logger(__name__)


class Handed:
    """A step handed to a recording thread: the future its attempt awaits, and the
    step's end once it came (result, error). An attempt cancelled meanwhile awaits a
    fresh future for the same end (``outlast``): the step runs on in its thread."""

    __slots__ = ("future", "ended")

    def __init__(self, future: "asyncio.Future[Any]") -> None:
        self.future = future
        self.ended: Optional[Tuple[Any, Optional[BaseException]]] = None


#: A step for a recording thread: where its end goes, and the step.
_Step = Tuple[Handed, Callable[[], Any]]


def settle_with(handed: Handed, result: Any, error: Optional[BaseException]) -> None:
    """On the loop: a step's end, kept, and given to the future awaited for it unless
    its awaiting attempt was cancelled meanwhile."""
    handed.ended = (result, error)
    future = handed.future
    if future.done():
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # which a future refuses to carry
        future.set_exception(RuntimeError(f"a recording step raised {error!r}"))
    else:
        future.set_exception(error)


async def outlast(handed: Handed) -> Tuple[Any, Optional[BaseException]]:
    """Wait for a step's end through any cancel (it runs on in its thread whatever its
    awaiting attempt does); its (result, error)."""
    while handed.ended is None:
        handed.future = asyncio.get_running_loop().create_future()
        try:
            await handed.future
        except asyncio.CancelledError:
            continue
        except BaseException:  # the step's own error: kept in ``ended``
            break
    assert handed.ended is not None  # kept before any future is settled
    return handed.ended


class RecordingThreads:
    """Threads beside the loop for the steps that wait for Redis (an outcome recorded
    with the next fetch), ``size`` at once; the loop awaits each step as a future. What
    ``loop.run_in_executor`` does, for less: no ``concurrent.futures.Future`` (a
    ``Condition`` each) chained to the loop's, no executor locks (a hop per task)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int, most: int = 0) -> None:
        self._loop = loop
        #: Threads serving; at most ``most`` (the pool's slots) with spares; those
        #: whose step waits for Redis (``_waiting``), not counted as serving.
        self._size, self._most = size, max(size, most)
        self._live, self._waits = size, 0
        self._growing = threading.Lock()
        self._steps: "_queue.SimpleQueue[Optional[_Step]]" = _queue.SimpleQueue()
        self._closed = False
        #: Ends of steps not taken by the loop yet; whether it was called to take them.
        self._answers: List[Tuple[Handed, Any, Optional[BaseException]]] = []
        self._called = False
        self._answering = threading.Lock()
        self._threads: List[threading.Thread] = [
            threading.Thread(target=self._serve, name=f"minitask-record-{index}", daemon=True)
            for index in range(size)]
        for thread in self._threads:
            thread.start()

    def run(self, step: Callable[[], Any]) -> "asyncio.Future[Any]":
        """On the loop: hand ``step`` to a recording thread; its result, or what it
        raised, comes back as the future's."""
        return self.hand(step).future

    def hand(self, step: Callable[[], Any]) -> Handed:
        """``run``, with what an attempt cancelled meanwhile needs to wait for the step's
        end (``outlast``). Once closed, the step fails at once: no thread is left to
        run it, and its awaiting attempt must not wait for ever."""
        handed = Handed(self._loop.create_future())
        if self._closed:
            settle_with(handed, None, RuntimeError("the asyncio pool's recording threads "
                                                   "have ended: a step came after its loop "
                                                   "stopped"))
            return handed
        self._steps.put((handed, step))
        return handed

    def _serve(self) -> None:
        waited: List[bool] = []
        pid = current_pid()  # the worker's (``forks``)
        with waiting_in(lambda: self._waiting(waited)):
            while True:
                handed = self._steps.get()
                if handed is None:
                    return
                ends, step = handed
                error: Optional[BaseException] = None
                try:
                    result = step()
                except BaseException as exc:  # the awaiting attempt's, as an executor's
                    result, error = None, exc
                # a copy a hook the step ran forked (task_success, _retry, _failure,
                # _dead) ends, handing nothing back (``forks``: read inline, no call)
                if (FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid) \
                        and current_pid() != pid:
                    leave(None)
                self._answer(ends, result, error)
                if waited:
                    waited.clear()
                    with self._growing:
                        self._waits -= 1
                        if self._live > self._size + self._waits:  # a spare is left over
                            self._live -= 1
                            self._threads.remove(threading.current_thread())
                            return

    def _waiting(self, waited: List[bool]) -> None:
        """A step of this thread waits for Redis: a spare serves meanwhile, so that as
        many threads as ``size`` serve while slots are left to serve."""
        if waited:
            return
        waited.append(True)
        with self._growing:
            self._waits += 1
            if self._closed or self._live - self._waits >= self._size or \
                    self._live >= self._most:
                return
            self._live += 1
            spare = threading.Thread(target=self._serve, daemon=True,
                                     name=f"minitask-record-spare-{self._live}")
            self._threads.append(spare)
        spare.start()

    def _answer(self, ends: Handed, result: Any, error: Optional[BaseException]) -> None:
        """Hand a step's end to the loop: steps that end while the loop has yet to take
        the ends before them go with those, one wake-up of the loop for all."""
        with self._answering:
            self._answers.append((ends, result, error))
            if self._called:  # a delivery is on its way to the loop: it takes this one
                return
            self._called = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nothing awaits any more; the step ran
            logger.debug("a recording step ended after the asyncio pool's loop closed")

    def _deliver(self) -> None:
        """On the loop: the ends of the steps that came since the last delivery."""
        with self._answering:
            answers, self._answers = self._answers, []
            self._called = False
        for ends, result, error in answers:
            try:
                settle_with(ends, result, error)
            except BaseException as exc:  # a bug of ours: the other ends still go
                log_error(logger, logging.ERROR, "could not hand a recording step's end "
                          "to its attempt", error=exc)

    def close(self) -> None:
        """Run the steps handed in so far, then end the threads; a step handed later
        fails at once. Called once the loop has stopped for good (``AsyncioPool``):
        an attempt on a loop still running could hand a step no thread would run."""
        with self._growing:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._steps.put(None)
        for thread in threads:
            thread.join()
