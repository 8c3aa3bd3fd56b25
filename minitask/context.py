"""current_task(): what the running attempt is, for code inside a task."""
from __future__ import annotations

import datetime as _dt
import threading
from contextvars import Context, ContextVar
from dataclasses import dataclass, field
import math
import re
from typing import Callable, Optional

from .errors import ConfigurationError
from .printable import own_logger, printable, shown_id
from .wire.message import Message, quick_init

logger = own_logger(__name__)

#: Takes a progress report: (current, total, message); the worker coalesces writes.
Report = Callable[[float, Optional[float], Optional[str]], None]

#: Characters of a progress message kept; a longer one is cut, and ends with
#: ``TRUNCATED`` (a note for people, not a log: Redis keeps one per running task).
MAX_PROGRESS_MESSAGE = 1000
TRUNCATED = "... [truncated]"
#: The integers msgpack carries whole; a progress number beyond them is sent as a float.
_INT_RANGE = (-(2 ** 63), 2 ** 64 - 1)
#: A lone surrogate (half of a UTF-16 pair): text UTF-8 cannot carry.
_SURROGATES = re.compile("[\ud800-\udfff]")


@quick_init
@dataclass(frozen=True)
class TaskContext:
    """The running attempt, as ``current_task()`` returns it.

    Attributes:
        id: the task id.
        name: the task's name.
        queue: the queue it came from.
        priority: its priority, 0..9.
        attempt: 1 for the first attempt, 2 for the first retry...
        enqueued_at: when it was enqueued, an aware UTC datetime.
        eta: when it was due, an aware UTC datetime; None if it was sent to run
            at once.
        delivery: the hand-overs of this attempt to a worker. Above 1, an
            earlier worker took it and died (or stalled past its lease) before
            recording an outcome, so the task may have run partly or wholly
            before.
    """

    id: str
    name: str
    queue: str
    priority: int
    attempt: int
    enqueued_at: _dt.datetime
    eta: Optional[_dt.datetime]
    delivery: int = 1
    #: Set when ``handle.cancel(running=True)`` asks this attempt to stop.
    cancel_event: Optional[threading.Event] = field(default=None, repr=False, compare=False)
    #: Where ``set_progress`` reports go (the worker's coalescing writer).
    report: Optional[Report] = field(default=None, repr=False, compare=False)

    def set_progress(self, current: float, total: Optional[float] = None,
                     message: Optional[str] = None) -> None:
        """Report how far this attempt has come; ``handle.progress()`` reads it.

        Cheap enough for a tight loop: it only notes the value, and the worker
        writes the latest one at most about ten times a second (within a
        second of the call, even if no call follows). It expires with the result.

        Args:
            current: work done so far, a finite number; an int beyond 64 bits
                is kept as a float.
            total: the whole, if known.
            message: a short note for people: its first 1,000 characters are
                kept (a longer one ends with "... [truncated]"), and a lone
                surrogate, which UTF-8 cannot carry, becomes U+FFFD.

        A float that is not finite (NaN, an infinity) or a number below 0, as a
        computation may make, is no error of the task's: that report is ignored,
        said by one WARNING per attempt, and the task goes on (a bad progress value
        never changes its outcome). A ``total`` below ``current`` is kept as given
        (a total may be an estimate the work outgrows).

        Raises:
            ConfigurationError: a value that is not a number, or an int no float can
                hold (or a message that is not a str).
        """
        current = self._progress_number("current", current)
        if total is not None:
            total = self._progress_number("total", total)
        if not (0 <= current < math.inf and (total is None or 0 <= total < math.inf)):
            self._ignored(current, total)  # nan, an infinity or below 0: no count
            return
        if message is not None:
            if not isinstance(message, str):
                raise ConfigurationError(f"task {self.name!r}: set_progress message must be "
                                         f"a str, got {message!r}")
            if len(message) > MAX_PROGRESS_MESSAGE:
                message = message[:MAX_PROGRESS_MESSAGE - len(TRUNCATED)] + TRUNCATED
            if not message.isascii():
                message = _SURROGATES.sub("\ufffd", message)
        if self.report is not None:
            self.report(current, total, message)

    def _progress_number(self, what: str, value: object) -> float:
        """A progress number msgpack can carry: a finite float, or an int of 64 bits."""
        number: float
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
            if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
                try:
                    number = float(value)
                except OverflowError:
                    number = math.inf  # refused below
        elif isinstance(value, float):
            return value  # NaN or an infinity: ignored, with a warning (set_progress)
        else:
            number = math.nan
        if not math.isfinite(number):
            # repr() of an int of thousands of digits raises: its size says enough
            shown = (f"{value!r}, a bool: not a count" if isinstance(value, bool)
                     else f"an int of {value.bit_length()} bits" if isinstance(value, int)
                     else repr(value))
            raise ConfigurationError(f"task {self.name!r}: set_progress {what} must be a "
                                     f"finite number, got {shown}")
        return number

    def _ignored(self, current: float, total: Optional[float]) -> None:
        """Say once per attempt that a report of a number that is not finite, or below
        0, was ignored (a tight loop of them must not flood the log)."""
        if self.__dict__.get("_said_not_finite"):
            return
        # the record is frozen, and compares by its fields: a note beside them
        self.__dict__["_said_not_finite"] = True
        logger.warning("task %r (id %s): set_progress(%r, %r) ignored: progress numbers "
                       "must be finite and 0 or more; the task goes on (said once per "
                       "attempt)",
                       printable(self.name), shown_id(self.id), current, total,
                       extra={"task_id": self.id, "task_name": self.name})

    @property
    def cancel_requested(self) -> bool:
        """True once ``handle.cancel(running=True)`` asked this attempt to stop.

        The thread pool cannot stop a thread: a long plain task checks this now
        and then and returns early. Whatever it then returns or raises, the task
        ends ``cancelled`` (not retried). The process and asyncio pools stop the
        attempt themselves, and the thread pool cancels an ``async def`` task's
        coroutine.
        """
        return self.cancel_event is not None and self.cancel_event.is_set()


_current: ContextVar[Optional[TaskContext]] = ContextVar("minitask_current_task", default=None)


_UTC = _dt.timezone.utc
_from_timestamp = _dt.datetime.fromtimestamp


def _utc(ms: int) -> _dt.datetime:
    """``ms`` as an aware UTC datetime (twice an attempt: no call nor keyword spared)."""
    return _from_timestamp(ms / 1000.0, _UTC)


def current_task() -> Optional[TaskContext]:
    """The context of the running attempt; None outside a task.

    Returns:
        The ``TaskContext`` of the attempt this thread (or asyncio task) runs.
    """
    return _current.get()


def task_in(context: Context) -> Optional[TaskContext]:
    """The attempt whose code runs in ``context`` (as ``current_task()`` there), or
    None: for the asyncio pool, which finds whose code raised out of its event loop
    by the context the raising callback ran in."""
    return context.get(_current)


class entered:
    """Make ``context`` current again (for the ``task_postrun`` hooks, which run once
    the attempt's outcome is recorded), as ``with entered(context) as context:``.

    A class, not a generator: a generator's context manager costs several calls
    more, twice for every attempt.
    """

    __slots__ = ("context", "_token")

    def __init__(self, context: TaskContext) -> None:
        self.context = context

    def __enter__(self) -> TaskContext:
        self._token = _current.set(self.context)
        return self.context

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def running(message: Message, delivery: int = 1,
            cancel: Optional[threading.Event] = None,
            report: Optional[Report] = None) -> entered:
    """Make ``message`` the current task for the duration of one attempt
    (``with running(...) as context:``); ``cancel`` is set when a stop of the
    attempt is requested."""
    return entered(TaskContext(
        id=message.id, name=message.task, queue=message.queue, priority=message.priority,
        attempt=message.attempt, enqueued_at=_utc(message.enqueued_at_ms),
        eta=_utc(message.eta_ms) if message.eta_ms is not None else None,
        delivery=delivery, cancel_event=cancel, report=report))
