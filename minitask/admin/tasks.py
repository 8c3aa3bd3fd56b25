"""Everything Redis holds about one task, looked up by its id: ``minitask inspect``."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..errors import DecodeError
from ..printable import nests_past, printable, shown_value
from ..stores.results import decode_result, unreadable_why
from ..wire.message import MAX_MS, Progress, to_seconds
from ..wire.serializer import MAX_DEPTH, decode_message, decode_outcome
from .activity import hides_args, lease_too_far
from .operated import Operated, lookup_queues

#: ``finished``: a kept result that cannot be read (its outcome's status when it can),
#: as ``handle.status()`` says it.
_STATUS = {"running": "running", "queued": "queued", "scheduled": "scheduled",
           "retrying": "retrying", "dead": "failed", "unknown": "unknown",
           "finished": "failed", "unreadable": "failed"}


#: What ``minitask inspect`` and the dashboard's task page say beside ``failed`` for a
#: task whose state or result cannot be read (``TaskInfo.unreadable``).
UNREADABLE = "unreadable: no outcome minitask wrote can be read, see note"


@dataclass(frozen=True)
class TaskInfo:
    """Everything Redis holds about one task: ``minitask inspect``."""

    task_id: str
    queue: str
    status: str
    name: str = ""
    args: Optional[List[Any]] = None
    kwargs: Optional[Dict[str, Any]] = None
    priority: Optional[int] = None
    attempt: Optional[int] = None
    deliveries: int = 0
    enqueued_at: Optional[_dt.datetime] = None
    eta: Optional[_dt.datetime] = None
    due_at: Optional[_dt.datetime] = None
    lease_until: Optional[_dt.datetime] = None
    value: Any = None
    exc_type: str = ""
    message: str = ""
    traceback: str = ""
    reason: str = ""
    finished_at: Optional[_dt.datetime] = None
    note: str = ""
    #: In the dead letters (``status`` is then ``failed``; ``finished_at`` is when it died).
    dead: bool = False
    #: The last ``set_progress`` of the task, until it expires with the result.
    progress: Optional[Progress] = None
    #: The task is registered with ``hide_args=True``: ``args`` and ``kwargs`` are None.
    args_hidden: bool = False
    #: A queued task that no worker takes yet, and why (its group is paused).
    held: str = ""
    #: ``status`` is ``failed`` only as ``handle.status()`` reads what cannot be read:
    #: a kept result no minitask wrote, or a key its state is read from of another
    #: type (``note`` says which). No failure was recorded: the surfaces say
    #: ``UNREADABLE`` beside the status (probe 29h, L4; SPEC.md allows no other name).
    unreadable: bool = False

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 strings."""
        return {name: _plain(value) for name, value in vars(self).items()}


def _plain(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, Progress):
        return {"current": value.current, "total": value.total, "message": value.message,
                "at": value.at.isoformat()}
    return value


def inspect(app: Operated, task_id: str,
            queues: Optional[Sequence[str]] = None) -> Optional[TaskInfo]:
    """What Redis holds about a task; None when no queue of the app knows the id (of
    ``queues``, by default those ``lookup_queues`` asks: the declared ones and
    ``LOOKUP_OTHERS`` more; a caller that reports what was not asked passes its own
    reading, so that the registry is read once).

    Raises:
        BrokerError: Redis could not be reached.
    """
    broker = app.broker
    asked = lookup_queues(app)[0] if queues is None else queues
    queue = broker.results.find_queue(task_id, asked)
    if queue is None:
        return None
    state, outcome_body = broker.results.state(queue, task_id)
    record = broker.admin.record(queue, task_id)
    far = lease_too_far(app, queue, record.lease_deadline_ms, app.clock.now_ms())
    progress, unread = broker.progress.read_noted(queue, task_id)
    fields: Dict[str, Any] = {"deliveries": record.deliveries, "due_at": _utc(record.due_ms),
                              "lease_until": None if far else _utc(record.lease_deadline_ms),
                              "progress": progress,
                              "note": _also(_also(_unreadable(state, outcome_body, record.foreign),
                                                  record.unreadable or far), unread)}
    for large in record.too_large:  # longer than minitask writes there: not read
        fields["note"] = _also(fields["note"], large)
    status = _STATUS.get(state, state)
    unreadable = state in ("finished", "unreadable")  # until a kept outcome is read
    if record.body is not None:
        try:
            message = decode_message(record.body)
        except DecodeError as exc:
            fields["note"] = _also(fields["note"], f"the message cannot be decoded: {exc}")
        else:
            hidden = hides_args(app, message.task)
            fields.update(name=message.task, args=None if hidden else message.args,
                          kwargs=None if hidden else message.kwargs, args_hidden=hidden,
                          priority=message.priority, attempt=message.attempt,
                          enqueued_at=_utc(message.enqueued_at_ms), eta=_utc(message.eta_ms))
    why = outcome_body if state == "finished" else (
        record.dead_info if state == "dead" else record.retry_note if state == "retrying"
        else None)
    if why is not None:
        try:
            outcome = (decode_outcome(why) if state != "finished" else decode_result(
                why, task_id, broker.results.keys(queue).result(task_id)))
        except DecodeError as exc:
            fields["note"] = _also(fields["note"], f"the outcome cannot be decoded: {exc}")
        else:
            if state == "finished":
                status, unreadable = outcome.status, False
                fields["attempt"] = outcome.attempt or None
            finished = outcome.finished_at_ms
            if not 0 <= finished <= MAX_MS:  # no minitask wrote it: said, not raised
                fields["note"] = _also(fields["note"], f"the outcome's time (finished_at_ms "
                                       f"{finished}) is no time minitask writes")
            value = outcome.value
            if nests_past(value, MAX_DEPTH):  # repr, JSON, a page: each would raise
                value = shown_value(value, 200)
                fields["note"] = _also(fields["note"], f"the value is nested more than "
                                       f"{MAX_DEPTH} levels deep, deeper than minitask "
                                       f"sends: shown cut short")
            fields.update(value=value, exc_type=outcome.exc_type,
                          message=outcome.message, traceback=outcome.traceback,
                          reason=outcome.reason,
                          finished_at=_utc(finished) if 0 <= finished <= MAX_MS else None)
    if status == "queued":
        group = broker.flow.paused_group_of(queue, task_id)
        if group is not None:
            fields["held"] = f"group {group!r} is paused"
    return TaskInfo(task_id=task_id, queue=queue, status=status, dead=state == "dead",
                    unreadable=unreadable, **fields)


def _unreadable(state: str, outcome: Optional[bytes], foreign: Sequence[str]) -> str:
    """What of the task's keys cannot be read: the one the state script names (its
    state is then unknown) and the others of another type (its message, say: no name
    nor arguments are shown), each once."""
    why = unreadable_why(state, outcome) or ""
    for key in foreign:
        if f"key {printable(key)} " not in why:
            why = _also(why, f"key {printable(key)} holds another type than minitask keeps "
                             f"there: no minitask wrote it, and it is not read")
    return why


def _also(note: str, more: str) -> str:
    return f"{note}; {more}" if note and more else note or more


def _utc(ms: Optional[int]) -> Optional[_dt.datetime]:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(to_seconds(ms), tz=_dt.timezone.utc)
