"""Operator actions on an app, as the ``minitask`` ops commands (and a dashboard)
use them: look a task up by id, purge what is ready, stop workers from afar.

Functions of an app rather than methods on it: they serve operators, not the
code that defines and sends tasks, and keep ``Minitask`` small.
"""
from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .app import Minitask
from .errors import ConfigurationError, DecodeError
from .wire.message import Progress, to_seconds
from .wire.serializer import decode_message, decode_outcome
from .stores.registry import SHUTDOWN

#: A worker whose last heartbeat is older than this is not live.
LIVE_MS = 60_000

_STATUS = {"running": "running", "queued": "queued", "scheduled": "scheduled",
           "retrying": "retrying", "dead": "failed", "unknown": "unknown"}


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


def app_queues(app: Minitask) -> List[str]:
    """Every queue the app has used or declares."""
    return sorted(set(app.broker.queues.queue_names()) | set(app.worker_queues()))


def inspect(app: Minitask, task_id: str) -> Optional[TaskInfo]:
    """What Redis holds about a task; None when no queue of the app knows the id.

    Raises:
        BrokerError: Redis could not be reached.
    """
    broker = app.broker
    queue = broker.results.find_queue(task_id, app_queues(app))
    if queue is None:
        return None
    state, outcome_body = broker.results.state(queue, task_id)
    record = broker.admin.record(queue, task_id)
    fields: Dict[str, Any] = {"deliveries": record.deliveries, "due_at": _utc(record.due_ms),
                              "lease_until": _utc(record.lease_deadline_ms),
                              "progress": broker.progress.read(queue, task_id)}
    status = _STATUS.get(state, state)
    if record.body is not None:
        try:
            message = decode_message(record.body)
        except DecodeError as exc:
            fields["note"] = f"the message cannot be decoded: {exc}"
        else:
            fields.update(name=message.task, args=message.args, kwargs=message.kwargs,
                          priority=message.priority, attempt=message.attempt,
                          enqueued_at=_utc(message.enqueued_at_ms), eta=_utc(message.eta_ms))
    why = outcome_body if state == "finished" else (
        record.dead_info if state == "dead" else record.retry_note if state == "retrying"
        else None)
    if why is not None:
        try:
            outcome = decode_outcome(why)
        except DecodeError as exc:
            fields["note"] = f"the outcome cannot be decoded: {exc}"
        else:
            if state == "finished":
                status = outcome.status
                fields["attempt"] = outcome.attempt or None
            fields.update(value=outcome.value, exc_type=outcome.exc_type,
                          message=outcome.message, traceback=outcome.traceback,
                          reason=outcome.reason, finished_at=_utc(outcome.finished_at_ms))
    return TaskInfo(task_id=task_id, queue=queue, status=status, dead=state == "dead", **fields)


def queue_counts(app: Minitask, queue: str) -> Dict[str, Any]:
    """A queue's counts (``QueueStore.counts``) with the tasks its limits park counted
    as ready: they wait for a rate or a ``max_running`` slot, not for a time.

    ``parked`` says how many of ``ready`` those are, when some are; they are not in
    ``ready_by_priority``, which counts the ready lists."""
    return all_queue_counts(app, [queue])[queue]


def all_queue_counts(app: Minitask, queues: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """``queue_counts`` of each queue, in four round trips whatever their number."""
    found = app.broker.queues.counts_many(queues)
    for queue, parked in app.broker.flow.parked_many(queues).items():
        if parked:
            found[queue]["ready"] += parked
            found[queue]["parked"] = parked
    return found


def purge_ready(app: Minitask, queue: str) -> int:
    """Delete every ready task of ``queue``; scheduled, running and dead ones stay.

    Returns:
        How many were deleted. Their status becomes ``unknown``.

    Raises:
        ConfigurationError: the queue name is invalid.
        BrokerError: Redis could not be reached.
    """
    app.check_queue_name(queue)
    return app.broker.admin.purge_ready(queue)


def live_workers(app: Minitask) -> List[Dict[str, str]]:
    """The app's workers whose heartbeat is recent, each a dict with its ``name``."""
    return app.broker.registry.live(int(time.time() * 1000), LIVE_MS)


def shutdown(app: Minitask, names: Sequence[str] = (), *, every: bool = False) -> List[str]:
    """Ask live workers to stop as on SIGTERM: they stop fetching, give running tasks
    their grace and exit; each acts on it at once (it waits on Redis for orders).

    Args:
        names: the workers to stop, as ``minitask status`` lists them.
        every: stop every live worker of the app instead.

    Returns:
        The names of the workers asked.

    Raises:
        ConfigurationError: no name and not ``every``, or a name that is no live worker
            (nothing is sent then).
        BrokerError: Redis could not be reached.
    """
    live = [info["name"] for info in live_workers(app)]
    if every:
        names = live
    elif not names:
        raise ConfigurationError("name the workers to stop (see minitask status), or pass --all")
    unknown = [name for name in names if name not in live]
    if unknown:
        raise ConfigurationError(
            f"no live worker of app {app.name!r} is named {', '.join(map(repr, unknown))}; "
            f"live workers: {', '.join(live) or 'none'}")
    for name in names:
        app.broker.registry.send_order(name, SHUTDOWN)
    return list(names)


def _utc(ms: Optional[int]) -> Optional[_dt.datetime]:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(to_seconds(ms), tz=_dt.timezone.utc)
