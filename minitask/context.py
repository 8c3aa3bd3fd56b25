"""current_task(): what the running attempt is, for code inside a task."""
from __future__ import annotations

import datetime as _dt
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator, Optional

from .message import Message, to_seconds


@dataclass(frozen=True)
class TaskContext:
    """The running attempt: ``attempt`` is 1-based; times are aware UTC datetimes.

    ``delivery`` counts the hand-overs of this attempt to a worker: above 1, an
    earlier worker took it and died (or stalled past its lease) before recording
    an outcome, so the task may have run partly or wholly before.
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

    @property
    def cancel_requested(self) -> bool:
        """True once ``handle.cancel(running=True)`` asked this attempt to stop.

        The thread pool cannot stop a thread: a long task checks this now and
        then and returns early. Whatever it then returns or raises, the task
        ends ``cancelled`` (not retried). The process and asyncio pools stop the
        attempt themselves.
        """
        return self.cancel_event is not None and self.cancel_event.is_set()


_current: ContextVar[Optional[TaskContext]] = ContextVar("minitask_current_task", default=None)


def _utc(ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(to_seconds(ms), tz=_dt.timezone.utc)


def current_task() -> Optional[TaskContext]:
    """The context of the attempt running in this thread, or None outside a task."""
    return _current.get()


@contextmanager
def running(message: Message, delivery: int = 1,
            cancel: Optional[threading.Event] = None) -> Iterator[TaskContext]:
    """Make ``message`` the current task for the duration of one attempt;
    ``cancel`` is set when a stop of the attempt is requested."""
    context = TaskContext(
        id=message.id, name=message.task, queue=message.queue, priority=message.priority,
        attempt=message.attempt, enqueued_at=_utc(message.enqueued_at_ms),
        eta=_utc(message.eta_ms) if message.eta_ms is not None else None,
        delivery=delivery, cancel_event=cancel)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
