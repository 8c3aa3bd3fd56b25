"""What a task's code does to the asyncio pool's shared event loop from outside its own
coroutine, brought back to the attempt it belongs to.

A ``KeyboardInterrupt`` or ``SystemExit`` raised in an asyncio task that a task's code
made (``asyncio.create_task``, ``gather``, ``wait_for``) or in a loop callback it
scheduled (``loop.call_soon``) is not the attempt's coroutine's: asyncio lets it out
of the event loop itself. On the thread and process pools that loop is the attempt's
own, so it fails the attempt; on the asyncio pool it used to end as a success, with
an ERROR naming no task and a false "stopped by a task's code" (issue 29). The same
for ``loop.stop()``: on the other pools it fails the attempt whose code called it
(asyncio's "Event loop stopped before Future completed"); here it stopped everyone's
loop for a moment and the attempt succeeded.

One rule now, as on the other pools: it is the failure of the attempt whose code did
it, found by the ``contextvars`` context the code ran in (an asyncio task and a loop
callback copy the context of the code that made them, and minitask's running task is
in it: ``minitask.context``). If that attempt has already ended (its code left a child
or a callback behind), it is logged, naming the task, with its traceback. The pool's
loop runs on, and no other attempt is touched.

The callback that raised is read from the traceback: the frame of asyncio's
``Handle._run``, which runs every callback and task step in its context, holds the
handle (``self._context``). Read, never changed; should asyncio ever run callbacks
elsewhere, the error is logged as of no known task, and the pool runs on all the same.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import Any, Callable, Dict, Optional, Tuple

from ...context import TaskContext, current_task, task_in
from ...printable import log_error, own_logger, shown_id

logger = own_logger(__name__)

#: Seconds between two errors saying a task's code stopped the loop (it runs again).
RESTART_SAID = 60.0

#: The code of asyncio's ``Handle._run``: the frame that runs a callback in its context.
_HANDLE_RUN = getattr(getattr(getattr(asyncio.events, "Handle", None), "_run", None),
                      "__code__", None)


def raised_in(error: BaseException) -> Optional[contextvars.Context]:
    """The context of the loop callback (or asyncio task step) that raised ``error``
    out of the event loop; None if the traceback does not show it."""
    found = None
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if _HANDLE_RUN is not None and frame.f_code is _HANDLE_RUN:
            context = getattr(frame.f_locals.get("self"), "_context", None)
            if isinstance(context, contextvars.Context):
                found = context  # the innermost one: the callback that raised
        trace = trace.tb_next
    return found


class Escapes:
    """The attempts whose code is running on the loop, and what escaped from each.

    Args:
        stop: the loop's own ``stop``, called for a stop no running attempt asked for.
    """

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        #: By ``id()`` of each running attempt's TaskContext: it, and the future of
        #: its code (an asyncio task, or a plain function's call in the executor;
        #: None while its ``task_prerun`` hooks run).
        self._running: Dict[int, Tuple[TaskContext, Optional["asyncio.Future[Any]"]]] = {}
        self._escaped: Dict[int, BaseException] = {}
        #: Who called ``stop`` last when it stopped the loop: for the line saying so.
        self.stopped_by: Optional[TaskContext] = None

    def enter(self, context: TaskContext, code: Optional["asyncio.Future[Any]"]) -> None:
        """An attempt's code runs (``code``, once it is made) in ``context``: what
        escapes from code that runs in it is that attempt's."""
        self._running[id(context)] = (context, code)

    def leave(self, context: TaskContext) -> Optional[BaseException]:
        """The attempt's code has ended: what escaped from it meanwhile, if anything
        (its failure); from now on what escapes from code it left is only logged."""
        self._running.pop(id(context), None)
        return self._escaped.pop(id(context), None)

    def _runs(self, context: Optional[TaskContext]) -> bool:
        held = None if context is None else self._running.get(id(context))
        return held is not None and held[0] is context

    def _fail(self, context: TaskContext, error: BaseException) -> None:
        """The attempt fails with ``error`` (the first to escape): its code is cancelled
        (a plain function's thread cannot be: its attempt fails once it returns)."""
        self._escaped.setdefault(id(context), error)
        code = self._running[id(context)][1]
        if isinstance(code, asyncio.Task) and not code.done():
            code.cancel()

    def escaped(self, error: BaseException) -> None:
        """On the loop's thread: ``error`` came out of the event loop. The failure of
        the running attempt whose code raised it, else logged naming whose it was."""
        context = raised_in(error)
        task = None if context is None else task_in(context)
        if task is not None and self._runs(task):
            logger.warning("task %r (id %s): code its attempt started (an asyncio task or a "
                           "loop callback) raised %s out of the asyncio pool's event loop: "
                           "the attempt fails with it; the loop runs on", task.name,
                           shown_id(task.id), type(error).__name__,
                           extra={"task_id": task.id, "task_name": task.name})
            self._fail(task, error)
        elif task is not None:
            log_error(logger, logging.ERROR, "task %r (id %s): code its attempt left behind "
                      "(an asyncio task or a loop callback) raised %s out of the asyncio "
                      "pool's event loop after the attempt had ended; logged only, the loop "
                      "runs on", task.name, shown_id(task.id), type(error).__name__,
                      error=error, extra={"task_id": task.id, "task_name": task.name})
        else:
            log_error(logger, logging.ERROR, "code of no running task (a callback or an "
                      "asyncio task outside any attempt) raised %s out of the asyncio pool's "
                      "event loop; the loop runs on", type(error).__name__, error=error)

    def stop(self) -> None:
        """``loop.stop()`` as a task's code calls it: the failure of the running attempt
        whose code called it (the loop, everyone's, runs on); else the loop stops, and
        runs again at once (``stopped_by`` says whose code stopped it)."""
        context = current_task()
        if context is not None and self._runs(context):
            self._fail(context, RuntimeError(
                f"task {context.name!r}: its code stopped the event loop (loop.stop()) "
                f"before its attempt ended; the asyncio pool's loop, which every attempt "
                f"shares, runs on"))
            return
        self.stopped_by = context
        self._stop()

    def said_stopped(self) -> str:
        """Whose code stopped the loop, for the line saying it runs again."""
        by, self.stopped_by = self.stopped_by, None
        if by is None:
            return "code of no running task"
        return f"the code of task {by.name!r} (id {shown_id(by.id)}) after its attempt ended"


def serve_loop(loop: asyncio.AbstractEventLoop, escapes: Escapes, closing: Callable[[], bool],
               running: Callable[[], str]) -> None:
    """Run the asyncio pool's ``loop`` until it stops with ``closing()`` true. A task's
    code may stop it (``loop.stop()`` once its attempt has ended; a running one's
    fails, ``Escapes.stop``): it runs again, its attempts going on (``running()``
    names them). What a task's code raises out of it is the failure of the attempt
    whose code raised it (``Escapes.escaped``)."""
    said: Optional[float] = None
    while True:
        raised = False
        try:
            loop.run_forever()
        except BaseException as exc:  # asyncio lets a SystemExit or KeyboardInterrupt
            # out of a callback: this thread must not end with every attempt's loop
            try:
                escapes.escaped(exc)
            except BaseException as failed:  # a bug of ours: the loop must run on
                log_error(logger, logging.ERROR, "the asyncio pool's event loop raised; "
                          "it runs again", error=failed)
            raised = True  # not stopped: it runs again at once, nothing to say
        if closing():  # the loop has stopped for good
            return
        # said at most once a RESTART_SAID: a task may stop it again and again
        if not raised and (said is None or time.monotonic() - said > RESTART_SAID):
            said = time.monotonic()
            logger.error("the asyncio pool's event loop was stopped (loop.stop()) by %s "
                         "(running: %s); it runs again", escapes.said_stopped(), running())
