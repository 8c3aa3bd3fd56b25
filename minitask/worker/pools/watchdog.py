"""LoopWatch: says out loud when a task's code blocks the asyncio pool's loop.

An ``async def`` task that calls a blocking function (``time.sleep``, a
synchronous HTTP or database client) holds the event loop: every other attempt
on it waits, and nothing fails or says why. asyncio's debug mode logs a slow
callback only once it has returned (a loop held for good says nothing), names
an asyncio Task rather than the minitask task, and costs every task a captured
stack; so the pool watches its loop itself.

A thread beside the loop hands it a no-op (``call_soon_threadsafe``) every
``BLOCKED_AFTER`` while attempts run, and waits for it at most as long: a no-op
still not run means the loop is held. The thread then asks asyncio which Task
the loop is stepping (``asyncio.current_task(loop)``, a lookup that holds for
any thread) and logs a WARNING naming that attempt's task and id, the tasks
waiting behind it, and what to do; once a minute per task name at most. While
no attempt runs, the thread sleeps until the pool wakes it (``wake``, as the
first attempt starts). The loop does nothing per task for it: one no-op a
period while busy, none idle; the pool, two dict entries per attempt.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from ...printable import own_logger

logger = own_logger(__name__)

#: Seconds the loop may go without running a callback before it is said to be
#: blocked: far longer than any step of a well-behaved coroutine.
BLOCKED_AFTER = 1.0
#: Seconds between two warnings about the same task.
SAID_EVERY = 60.0

#: What the pool tells the watch of the attempt an asyncio Task belongs to
#: (task name, task id), None for a Task that is no attempt's.
Holder = Callable[["asyncio.Task[object]"], Optional[Tuple[str, str]]]


class LoopWatch:
    """Watches ``loop`` from a thread of its own until ``stop``.

    Args:
        loop: the pool's event loop, run in another thread.
        running: the names of the tasks whose attempts are on the loop now.
        holder: the attempt an asyncio Task runs, if any (task name, task id).
        blocked_after: seconds without a callback run that make the loop blocked.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, running: Callable[[], List[str]],
                 holder: Holder, blocked_after: float = BLOCKED_AFTER) -> None:
        self._loop = loop
        self._running = running
        self._holder = holder
        self._blocked_after = blocked_after
        self._said: Dict[str, float] = {}
        self._busy = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="minitask-asyncio-watch")
        self._thread.start()

    def wake(self) -> None:
        """An attempt started with none running: watch again. The pool calls it after
        adding the attempt to what ``running`` reads, so no start goes unseen."""
        self._busy.set()

    def stop(self) -> None:
        self._stopped.set()
        self._busy.set()
        self._thread.join(timeout=self._blocked_after * 2)

    def _watch(self) -> None:
        while not self._stopped.wait(self._blocked_after):
            if not self._running():
                self._busy.clear()
                if not self._running():  # else it started between the two looks
                    self._busy.wait()  # idle: asleep until an attempt starts, or stop
                continue
            answered = threading.Event()
            try:
                self._loop.call_soon_threadsafe(answered.set)
            except RuntimeError:  # the loop is closed: the pool is gone
                return
            if answered.wait(self._blocked_after):
                continue
            self._blocked()
            # one warning a block: watch again once the loop has run the no-op
            while not answered.wait(self._blocked_after):
                if self._stopped.is_set():
                    return

    def _blocked(self) -> None:
        """The loop has run nothing for ``blocked_after``: say who holds it."""
        current = asyncio.current_task(self._loop)
        found = None if current is None else self._holder(current)
        waiting = sorted(set(self._running()))
        now = time.monotonic()
        keys = [found[0]] if found is not None else waiting
        if all(now - self._said.get(key, -SAID_EVERY) < SAID_EVERY for key in keys):
            return
        self._said.update((key, now) for key in keys)
        if found is not None:
            name, task_id = found
            others = [other for other in waiting if other != name]
            logger.warning(
                "task %r (id %s) has blocked the asyncio pool's event loop for more than "
                "%.1f s: its code calls something that blocks (time.sleep, a synchronous "
                "HTTP or database client) instead of awaiting, and every other attempt on "
                "the loop waits meanwhile%s. Await a non-blocking call instead (asyncio."
                "sleep, an async client), or run the blocking call in a thread (await "
                "asyncio.to_thread(...)), or make the task a plain def, or use --pool "
                "thread (said once a minute per task)", name, task_id,
                self._blocked_after, f" (waiting: {', '.join(others)})" if others else "")
        else:
            logger.warning(
                "the asyncio pool's event loop has run nothing for more than %.1f s, held "
                "by code outside the tasks' coroutines (a callback, a hook) or starved by "
                "other threads; tasks waiting on it: %s (said once a minute per task)",
                self._blocked_after, ", ".join(waiting))
