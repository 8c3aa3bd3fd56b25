"""Coroutines of the asyncio pool left running past their time limit (or a cancel).

A coroutine that takes its cancellation and goes on (``except BaseException: pass``,
then awaits again) cannot be stopped: asyncio has no other way in. A plain function
that runs past its limit holds its thread, its slot, until it returns (the thread
pool, and the asyncio pool's executor); such a coroutine likewise holds its slot
until it ends. So the pool never runs more than ``-c`` attempts and left-running
coroutines together: each one left lowers what the worker takes, and with every slot
held so it takes no work and says so. Its attempt's outcome is recorded at once (a
``TimeLimitExceeded``, retried or dead by its task's options; a cancel's
``cancelled``): its lease is not held for code that may never end, so a retry may run
while it still runs (the guarantees page). Each is said once, naming the task; the
count goes with the worker's heartbeat (``minitask status``).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Dict, NamedTuple, Optional

from ...printable import own_logger
from ..leases import Job
from ..runner import UNWIND

logger = own_logger(__name__)


class Overrun(NamedTuple):
    """One coroutine left running: its task's name and id, the coroutine's asyncio task,
    and when it was left (``time.monotonic()``)."""

    name: str
    task_id: str
    future: "asyncio.Future[Any]"
    since: float


class Overruns:
    """The asyncio pool's slots held by coroutines left running, by the slot's task."""

    def __init__(self, size: int) -> None:
        self._size = size
        #: The slot's asyncio task (its ``_run``) -> what holds it.
        self.held: Dict["asyncio.Task[Any]", Overrun] = {}
        #: The coroutines left running, until each ends (a stop ends the holds, not them).
        self.running: Dict["asyncio.Future[Any]", Overrun] = {}

    @property
    def count(self) -> int:
        """Coroutines left running now (the heartbeat's ``overrun``)."""
        return len(self.running)

    def left(self, slot: "asyncio.Task[Any]", name: str, task_id: str,
             future: "asyncio.Future[Any]", asked: bool, limit: Optional[float]) -> None:
        """Say (once) that task ``name`` ``task_id``'s coroutine did not end ``UNWIND``
        seconds after its cancel (``asked``: cancel(running=True); else its time limit,
        ``limit`` seconds), and hold ``slot`` for it."""
        self.held[slot] = self.running[future] = Overrun(name, task_id, future,
                                                         time.monotonic())
        future.add_done_callback(self._ended)
        why = "cancel(running=True)" if asked else f"its timeout of {limit} s"
        held = len(self.held)
        logger.error("task %s %s: its coroutine did not end within %s s of its cancel (%s): "
                     "it takes CancelledError and goes on; left running, it holds its slot "
                     "until it ends (%d of %d slot(s) held so); its attempt's outcome is "
                     "recorded now", name, task_id, UNWIND, why, held, self._size)
        if held >= self._size:
            logger.error("every slot of the asyncio pool (%d) is held by a coroutine left "
                         "running past its cancel: the worker takes no work until one ends; "
                         "restart it (minitask shutdown, then start it again) to end them",
                         self._size)

    def _ended(self, future: "asyncio.Future[Any]") -> None:
        held = self.running.pop(future, None)
        if held is not None:
            logger.warning("task %s %s: its coroutine left running has ended, %.1f s later",
                           held.name, held.task_id, time.monotonic() - held.since)
        if not future.cancelled():
            future.exception()  # retrieved: no "never retrieved" warning

    async def hold(self, slot: "asyncio.Task[Any]", following: Optional[Job],
                   give_back: Callable[[Job], Awaitable[None]],
                   stopping: Callable[[], bool]) -> None:
        """Hold ``slot`` until its coroutine left running ends, or the pool stops (the
        stop's cancel goes on; another's, a task's code cancelling the pool's tasks, is
        no end of it); ``following``, leased with the outcome, goes back first, and is
        the slot's no more: the caller forgets it before the call. (It kept it: a stop's
        cancel during the hold gave it back again, when another worker may run it by
        then, and release.lua, which knows no owner, took that worker's lease and queued
        the task again: two runs at once.)"""
        held = self.held[slot]
        try:
            if following is not None:
                await give_back(following)
            while not held.future.done():
                try:
                    await asyncio.wait({held.future})
                except asyncio.CancelledError:
                    if stopping():
                        raise
                    while slot.uncancel() > 0:
                        pass
            logger.info("task %s %s: its slot takes work again", held.name, held.task_id)
        finally:
            del self.held[slot]
