"""Soft time limits: ``SoftTimeLimitExceeded`` raised inside a running attempt.

One way per kind of attempt:

* a plain function in a process pool child (it runs in the child's main
  thread): a one-shot ``ITIMER_REAL`` timer whose ``SIGALRM`` handler raises
  the exception in the function, also inside a blocking call such as
  ``time.sleep`` or a socket read, which the signal interrupts;
* a plain function in a thread (thread pool, the asyncio pool's executor): a
  timer thread posts it as an asynchronous exception, which Python raises
  between bytecodes only: a thread blocked in C (``time.sleep``, a socket
  read) sees it once that call returns;
* a coroutine: at the limit what it awaits is cancelled, and the exception is
  thrown in at that ``await`` instead of ``CancelledError`` (as a subclass of
  both, so that asyncio's helpers stop what they started).

The limit is armed just before the task's function is called and cleared just
after, in the caller's frame: the exception is raised in the task's code or,
at worst, in ``call_with_alarm``/``call_with_posting`` around the call (then it
fails the attempt as it would have a moment earlier); never once they return,
so never in the code that records the outcome.

A process pool child's ``ITIMER_REAL`` and ``SIGALRM`` are minitask's between
attempts: a task that leaves a timer of its own armed (``signal.setitimer``,
``signal.alarm``) would have it ring in the later tasks of that child, or in
the worker's own code. The child disarms it as the attempt ends (``AlarmGuard``),
and puts back the handler it started with. Those two functions hold no
loop: CPython may skip the handlers of the function an exception from outside
is raised in when it comes at the end of a loop's turn (CPython issues 108214,
130279), never those of its callers, so their ``finally`` always runs.
"""
from __future__ import annotations

import asyncio
import ctypes
import signal
import threading
from types import FrameType
from typing import Any, Callable, Coroutine, Dict, Generator, List, Optional, Sequence, Set, Type

from ..errors import SoftTimeLimitExceeded
from ..printable import own_logger, printable

logger = own_logger(__name__)

#: When the alarm finds the main thread in ``call_with_alarm`` itself (the
#: function not entered yet, or returned), it comes back after this long.
ALARM_RETRY = 0.005


def soft_error(name: str, limit: float) -> SoftTimeLimitExceeded:
    return SoftTimeLimitExceeded(
        f"task {name!r} ran past its soft timeout of {limit:g} s; catch "
        f"SoftTimeLimitExceeded to clean up before its timeout", task_name=name, limit=limit)


# -- a process pool child: SIGALRM in the main thread ---------------------------------

class _Alarm:
    """The one ``ITIMER_REAL`` of this process, and what it raises when it rings."""

    error: Optional[SoftTimeLimitExceeded] = None


def _on_alarm(signum: int, frame: Optional[FrameType]) -> None:
    error = _Alarm.error
    if error is None:
        return  # rang as the attempt ended: nothing to interrupt any more
    if frame is not None and (frame.f_code is _ALARM_CALLER or frame.f_code is _HANDLER):
        # Between arming and the call, or between the return and the clearing, or
        # in this handler run for a ring before (a slow one): not the task's code.
        # Ring again soon: in the task if it has not started yet; never if the
        # call is over, as clearing the timer comes next.
        signal.setitimer(signal.ITIMER_REAL, ALARM_RETRY)
        return
    _Alarm.error = None  # once per attempt
    raise error


def call_with_alarm(func: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any],
                    limit: float, name: str) -> Any:
    """Call ``func`` in the main thread; ``SIGALRM`` raises the soft limit in it."""
    if signal.getsignal(signal.SIGALRM) is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    _Alarm.error = soft_error(name, limit)
    # Linux hands a process's SIGALRM to its main thread unless that blocks it or
    # has another signal pending (whose own interruption then runs this handler
    # too), so the main thread's blocking call is interrupted.
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return func(*args, **kwargs)
    finally:
        # Only attribute stores and C calls from here: a handler run now runs in
        # this frame (see _on_alarm), and one run after the first line does nothing.
        _Alarm.error = None
        signal.setitimer(signal.ITIMER_REAL, 0)


_ALARM_CALLER = call_with_alarm.__code__
_HANDLER = _on_alarm.__code__


# -- a process pool child, after each attempt: the alarm a task left -------------------

#: Task names said to have left an alarm armed, once each per process; at most this
#: many are kept (then every such task is said again: no name list grows for ever).
SAID_MOST = 1000
_SAID_LEFT: Set[str] = set()


class AlarmGuard:
    """What a process pool child's attempts must not leave behind: an ``ITIMER_REAL``
    timer armed, and a ``SIGALRM`` handler of their own (``handler``: the one this
    child started with, read as it makes the guard; ``task``: the name of the attempt
    running, which the child's ``on_start`` notes). The child's ``on_end`` stops the
    timer as an attempt ends (before its outcome is recorded), before anything else
    runs, inline, with one C call and no Python call a task::

        if signal.setitimer(signal.ITIMER_REAL, 0)[0]:
            guard.left()

    A handler left with no timer is left: nothing rings it (a soft limit sets its own)."""

    __slots__ = ("handler", "task")

    def __init__(self) -> None:
        self.handler = signal.getsignal(signal.SIGALRM)
        self.task = ""

    def left(self) -> None:
        """The attempt left a timer armed (stopped already): ``left_alarm``."""
        left_alarm(self.task, self.handler)


def left_alarm(name: str, handler: Any) -> None:
    """The attempt of task ``name`` left an ``ITIMER_REAL`` timer armed (stopped
    already): put ``handler`` back as ``SIGALRM``'s, and say so, once per task name."""
    for _ in range(3):
        try:
            # a ring that came before the timer stopped runs the task's handler, at
            # latest in ``signal.signal``: its error belongs to no attempt any more
            signal.setitimer(signal.ITIMER_REAL, 0)
            if signal.getsignal(signal.SIGALRM) is not handler:
                signal.signal(signal.SIGALRM, signal.SIG_DFL if handler is None else handler)
            break
        except Exception:  # noqa: BLE001 (the task's handler, for a ring of before)
            pass
    if name in _SAID_LEFT:
        return
    if len(_SAID_LEFT) >= SAID_MOST:
        _SAID_LEFT.clear()
    _SAID_LEFT.add(name)
    logger.warning("task %r left an alarm armed (a SIGALRM timer: signal.setitimer or "
                   "signal.alarm) as its attempt ended: stopped, and the SIGALRM handler "
                   "put back, so that it rings in no later task of this process; a task "
                   "should stop the timers it starts (signal.setitimer(signal.ITIMER_REAL, 0)); "
                   "said once per task", printable(name), extra={"task_name": name})


# -- a thread: an asynchronous exception ---------------------------------------------

def _post(ident: int, error: Optional[Type[BaseException]]) -> None:
    """Have thread ``ident`` raise ``error`` at its next bytecode (None: forget it)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), None if error is None else ctypes.py_object(error))


class _Posting:
    """One attempt's timer: posts the exception while the attempt is in its call."""

    def __init__(self, ident: int, error: Type[BaseException]) -> None:
        self.ident = ident
        self.error = error
        self.live = False  # in the call: posting allowed
        self.rang = False
        self.lock = threading.Lock()

    def ring(self) -> None:
        with self.lock:
            self.rang = True
            if self.live:
                _post(self.ident, self.error)


def _raised_class(name: str, limit: float) -> Type[SoftTimeLimitExceeded]:
    """An asynchronous exception is raised from its class, with no arguments: a
    subclass of ``SoftTimeLimitExceeded`` that words this attempt's message."""
    worded = str(soft_error(name, limit))

    def __init__(self: SoftTimeLimitExceeded, message: Optional[str] = None) -> None:
        SoftTimeLimitExceeded.__init__(self, message or worded, task_name=name, limit=limit)
    return type(SoftTimeLimitExceeded.__name__, (SoftTimeLimitExceeded,),
                {"__init__": __init__, "__module__": SoftTimeLimitExceeded.__module__,
                 "__qualname__": SoftTimeLimitExceeded.__qualname__})


def call_with_posting(func: Callable[..., Any], args: Sequence[Any],
                      kwargs: Dict[str, Any], limit: float, name: str) -> Any:
    """Call ``func`` in this thread; a timer raises the soft limit in it."""
    posting = _Posting(threading.get_ident(), _raised_class(name, limit))
    timer = threading.Timer(limit, posting.ring)
    timer.daemon = True
    timer.name = "minitask-soft-limit"
    timer.start()  # Python code in this thread: nothing may be posted into it yet
    try:
        with posting.lock:  # a C lock: entered and left without Python frames
            posting.live = True
            if posting.rang:  # the limit passed while the timer started: at once
                _post(posting.ident, posting.error)
        return func(*args, **kwargs)
    finally:
        with posting.lock:  # the timer posts nothing after this block
            posting.live = False
            _post(posting.ident, None)  # posted, not raised yet: dropped
        timer.cancel()


# -- a coroutine: thrown in at its await -----------------------------------------------

class _SoftCancel(SoftTimeLimitExceeded, asyncio.CancelledError):
    """The soft limit as thrown into a coroutine: a cancellation too, so that what
    asyncio stops on cancellation (a TaskGroup's tasks, ``gather``'s, ``wait_for``'s)
    stops, and the exception then goes on to the task's code as it was."""


class SoftLimited:
    """Awaits a coroutine; at ``limit`` seconds throws the soft limit into it.

    It drives the coroutine itself (as ``await`` would) so that it can throw
    ``SoftTimeLimitExceeded`` where the coroutine waits: at the limit it cancels
    its task, which wakes it, and turns that cancellation into the soft limit
    (``uncancel``, so that ``cancelling()`` and ``asyncio.timeout`` stay right).
    A cancellation of the task by anything else at the same moment wins. What
    the coroutine lets escape of it fails the attempt as a plain
    ``SoftTimeLimitExceeded``, not as a cancellation.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], limit: float, name: str) -> None:
        self._coro = coro
        self._limit = limit
        self._name = name

    def __await__(self) -> Generator[Any, Any, Any]:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a soft time limit needs a running asyncio task")
        rung: List[SoftTimeLimitExceeded] = []

        def ring() -> None:
            message = str(soft_error(self._name, self._limit))
            rung.append(_SoftCancel(message, task_name=self._name, limit=self._limit))
            task.cancel()

        timer = asyncio.get_running_loop().call_later(self._limit, ring)
        coro, value, error = self._coro, None, None
        try:
            while True:
                try:
                    step = coro.send(value) if error is None else coro.throw(error)
                except StopIteration as stop:
                    return stop.value
                except _SoftCancel as exc:  # not caught: a failure, not a cancellation
                    plain = soft_error(self._name, self._limit)
                    raise plain.with_traceback(exc.__traceback__) from None
                try:
                    value, error = (yield step), None
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:  # thrown in by the task: given to the coroutine
                    value, error = None, exc
                    if isinstance(exc, asyncio.CancelledError) and rung:
                        soft = rung.pop()
                        if task.uncancel() == 0:  # none but ours
                            error = soft
        finally:
            timer.cancel()


async def soft_limited(coro: Coroutine[Any, Any, Any], limit: float, name: str) -> Any:
    """Await ``coro`` with a soft limit (see ``SoftLimited``)."""
    return await SoftLimited(coro, limit, name)
