"""An ``async def`` task's attempt on the thread and process pools: a loop of its own,
whose end is bounded.

``asyncio.run`` ends its loop by cancelling what the coroutine left behind and
waiting for it, then for the loop's async generators, then for the threads of
its default executor, each without limit: an attempt that returned but left an
asyncio task that swallows its cancellation, or a call in the executor
(``run_in_executor(None, ...)``, ``asyncio.to_thread``) that runs on, never
ended; its slot was lost and its task stayed "running" (issue 29). Here the
attempt's value (or exception) is taken when its coroutine ends; what it left
is cancelled and gets ``LEFTOVER_WAIT`` seconds, never past the task's time
limit, to end, on a thread of its own (so that even a blocking call in that
code cannot hold the pool's thread); what has not ended by then is abandoned
with one warning naming the task: an asyncio task is never run again, and an
executor thread, which nothing can stop, runs on until its call returns.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from typing import Any, Callable, Coroutine, List, Optional, Set

from ..printable import log_error, own_logger
from .leftovers import KEPT, kept_too_many

logger = own_logger(__name__)

#: Seconds what an attempt's coroutine left behind (asyncio tasks, async generators,
#: calls in the loop's default executor) gets to end once its coroutine has ended.
LEFTOVER_WAIT = 1.0
#: Seconds before a task's time limit at which its leftovers are abandoned: a task
#: that returned in time is not failed (or killed, in a process pool child) for them.
LIMIT_MARGIN = 0.1
#: The least a leftover gets, past the time limit too: enough to take its
#: cancellation and end, for code that does.
LEAST_WAIT = 0.02
#: Seconds the executor's idle threads get to see the shutdown and end.
IDLE_THREADS_WAIT = 0.05
#: How many leftovers a warning names.
NAMED = 5
#: The name of the asyncio tasks that unwind the leftovers, never named as leftovers.
OURS = "minitask-unwind"


def run_coroutine(main: Coroutine[Any, Any, Any], name: str, limit: Optional[float],
                  stoppable: Optional[Callable[[Callable[[], object]], bool]] = None) -> Any:
    """Run ``main`` (task ``name``'s attempt) on a new event loop until it ends, and
    return its value or raise its exception; then end the loop (``end_loop``).

    ``stoppable`` (the thread pool's ``CancelBoard.set_stopper`` for the attempt)
    is given how to cancel the attempt's asyncio task from another thread, for
    ``cancel(running=True)``: as the asyncio pool does, not only
    ``cancel_requested`` (issue 29). False back: the stop was asked already.

    Not ``asyncio.run``, whose end waits without limit (see the module's doc).
    """
    started = time.monotonic()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # as asyncio.run: get_event_loop() in the task finds it
    try:  # the attempt's task made directly, not by a factory (see runner.spawn)
        attempt = asyncio.Task(main, loop=loop)
        if stoppable is not None and not stoppable(functools.partial(_cancel, loop, attempt)):
            attempt.cancel()  # the request came in as it started
        return loop.run_until_complete(attempt)
    finally:
        asyncio.set_event_loop(None)
        until = started + limit - LIMIT_MARGIN if limit is not None else float("inf")
        end_loop(loop, name, min(until, time.monotonic() + LEFTOVER_WAIT))


def _cancel(loop: asyncio.AbstractEventLoop, attempt: "asyncio.Task[Any]") -> None:
    """Cancel ``attempt`` on ``loop`` from another thread (the cancel watch's); a loop
    closed meanwhile had ended the attempt already."""
    try:
        loop.call_soon_threadsafe(attempt.cancel)
    except RuntimeError:
        pass


def end_loop(loop: asyncio.AbstractEventLoop, name: str, until: float) -> None:
    """Close ``loop`` once what task ``name``'s attempt left on it has ended, or at
    ``until`` (``time.monotonic()``), what is left then abandoned; never raises."""
    try:
        _end(loop, name, until)
    except Exception as exc:  # the attempt's outcome is decided: only say so
        log_error(logger, logging.ERROR, "task %r: ending the event loop of its attempt "
                  "failed", name, error=exc)


def _end(loop: asyncio.AbstractEventLoop, name: str, until: float) -> None:
    if loop.is_closed():
        return
    tasks = asyncio.all_tasks(loop)
    # what asyncio.run would wait for, and callbacks due (an async generator the attempt
    # dropped: its aclose); read, never changed, here (private to asyncio)
    generators = getattr(loop, "_asyncgens", None) or getattr(loop, "_ready", None)
    executor = getattr(loop, "_default_executor", None)
    if not tasks and not generators and executor is None:
        loop.close()  # the common case: nothing left, no thread
        return
    until = max(until, time.monotonic() + LEAST_WAIT)
    given = until - time.monotonic()
    raised: List[BaseException] = []
    blocked = False
    if tasks or generators:
        unwinding = threading.Thread(target=_unwind, args=(loop, tasks, until, raised),
                                     name=f"minitask-unwind-{name}"[:80], daemon=True)
        unwinding.start()
        unwinding.join(given + IDLE_THREADS_WAIT)
        blocked = unwinding.is_alive()
    else:
        loop.close()
    running = _shut(executor, until)
    pending = [task for task in tasks | asyncio.all_tasks(loop)
               if not task.done() and task.get_name() != OURS]
    if raised:
        log_error(logger, logging.WARNING, "task %r: %d asyncio task(s) it left running "
                  "raised as they were cancelled at the end of its attempt (the first "
                  "shown)", name, len(raised), error=raised[0])
    if pending or running or blocked:
        _warn(name, pending, running, blocked, given)


def _unwind(loop: asyncio.AbstractEventLoop, tasks: Set["asyncio.Task[Any]"], until: float,
            raised: List[BaseException]) -> None:
    """On a thread of its own: cancel ``tasks``, close the async generators, and run
    the loop until they end or ``until``; then close the loop (abandoning the rest)."""
    try:
        loop.set_task_factory(None)  # the attempt is over: its code's factory makes no more
        unwinding = asyncio.Task(_cancelled(loop, tasks, until), loop=loop, name=OURS)
        while True:
            try:
                loop.run_until_complete(unwinding)
            except BaseException:  # noqa: B902 - a leftover's own KeyboardInterrupt or
                pass  # SystemExit leaves the loop, or its code stopped it: run it on
            if unwinding.done() or time.monotonic() > until + IDLE_THREADS_WAIT:
                break
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raised.append(task.exception())  # type: ignore[arg-type]
        for task in asyncio.all_tasks(loop):  # abandoned: no "destroyed but it is pending"
            task._log_destroy_pending = False  # type: ignore[attr-defined]
            # and never collected: collecting it closes its coroutine, and one that takes
            # every exception (GeneratorExit too) then ran for ever in whichever thread
            # collected it (the worker's exit hung); the exit ends it (``leftovers``)
            KEPT.add(task)
        kept_too_many(say=True)  # (a process pool's child is replaced, between tasks)
        loop.close()
    except Exception as exc:
        log_error(logger, logging.ERROR, "unwinding what an attempt left on its event loop "
                  "failed", error=exc)


async def _cancelled(loop: asyncio.AbstractEventLoop, tasks: Set["asyncio.Task[Any]"],
                     until: float) -> None:
    for task in tasks:
        if type(task.get_coro()).__name__ != "async_generator_athrow":
            task.cancel()  # not an async generator's aclose(): it is the clean-up
    await asyncio.sleep(0)  # callbacks due run: a dropped async generator's aclose begins
    current = asyncio.current_task()
    waiting = {task for task in asyncio.all_tasks(loop) if task is not current}
    if waiting:
        await asyncio.wait(waiting, timeout=_left(until))
    closing = asyncio.Task(loop.shutdown_asyncgens(), loop=loop, name=OURS)
    await asyncio.wait({closing}, timeout=_left(until))
    if not closing.done():
        closing.cancel()


def _left(until: float) -> float:
    return max(LEAST_WAIT, until - time.monotonic())


def _shut(executor: Any, until: float) -> List[str]:
    """Shut the loop's default executor without waiting for its calls (one not begun
    is cancelled); the names of its threads still running one at ``until``."""
    if executor is None:
        return []
    executor.shutdown(wait=False, cancel_futures=True)
    threads: List[threading.Thread] = list(getattr(executor, "_threads", ()))
    end = max(until, time.monotonic() + IDLE_THREADS_WAIT)
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


def _warn(name: str, pending: List["asyncio.Task[Any]"], running: List[str],
          blocked: bool, given: float) -> None:
    left = []
    if pending:
        shown = [f"{task.get_name()} {_coroutine_name(task)}" for task in pending[:NAMED]]
        more = f" and {len(pending) - NAMED} more" if len(pending) > NAMED else ""
        left.append(f"{len(pending)} asyncio task(s) ({', '.join(shown)}{more})")
    if running:
        left.append(f"{len(running)} thread(s) of its loop's default executor still "
                    f"running a call ({', '.join(running)})")
    logger.warning(
        "task %r: its attempt is over, but what it left behind had not ended %.2f s later "
        "(cancelled where it could be): %s%s; abandoned: an asyncio task is never run "
        "again, an executor thread runs on until its call returns (a thread cannot be "
        "stopped). A task should await (or cancel and await) what it starts before it "
        "returns", name, given, " and ".join(left) or "code",
        ", its event loop held by a blocking call in that code" if blocked else "")


def _coroutine_name(task: "asyncio.Task[Any]") -> str:
    coro = task.get_coro()
    return f"{getattr(coro, '__qualname__', type(coro).__name__)}()"


__all__ = ["LEFTOVER_WAIT", "end_loop", "run_coroutine"]
