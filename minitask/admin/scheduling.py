"""Schedules added, removed and listed at run time, for every worker of the app."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import ConfigurationError
from ..options import check_priority
from ..periodic import Schedule, build as build_schedule
from ..sending import check_queue_name
from ..task import Task
from .operated import Operated, app_queues


def add_schedule(app: Operated, name: str, task: Union[Task[Any, Any], str], *,
                 cron: Optional[str] = None, every: Optional[float] = None,
                 tz: str = "UTC", args: Sequence[Any] = (),
                 kwargs: Optional[Dict[str, Any]] = None, catch_up: str = "latest",
                 overlap: bool = True, queue: Optional[str] = None,
                 priority: Optional[int] = None) -> Schedule:
    """``Minitask.add_schedule``: add or replace a schedule; returns it as stored."""
    registered = app.tasks.get(task) if isinstance(task, str) else task
    if not isinstance(registered, Task):
        raise ConfigurationError(f"schedule {name!r}: task must be a task of this app or "
                                 f"its name, got {task!r}; known: "
                                 f"{', '.join(sorted(app.tasks)) or '(none)'}")
    target = registered.queue if queue is None else queue
    check_queue_name(target)
    level = registered.priority if priority is None else check_priority(
        priority, f"schedule {name!r}")
    schedule = build_schedule(name, registered.name, registered.func, cron=cron,
                              every=every, tz=tz, args=args, kwargs=kwargs,
                              catch_up=catch_up, overlap=overlap, queue=target,
                              priority=level, max_message_bytes=app.max_message_bytes,
                              types=app.broker.types)
    store = app.broker.schedules
    for other in app_queues(app):
        if other != target:
            store.remove(other, name)
    app.broker.queues.register_queues([target])
    store.save(schedule, schedule.next_after(app.clock.now_ms()))
    for found in store.listing(target):
        if found.name == name:
            return found
    return schedule  # pragma: no cover - removed again by another process meanwhile


def remove_schedule(app: Operated, name: str) -> bool:
    """``Minitask.remove_schedule``: False when no schedule has this name."""
    app.periodic_schedules.pop(name, None)
    removed = False
    for queue in app_queues(app):
        removed = app.broker.schedules.remove(queue, name) or removed
    return removed


def schedules(app: Operated) -> List[Schedule]:
    """``Minitask.schedules``: every schedule of the app, by name."""
    return schedule_listing(app)[0]


def schedule_listing(app: Operated) -> Tuple[List[Schedule], List[Dict[str, str]]]:
    """Every schedule of the app, by name; and each schedule record that cannot be
    listed (``minitask schedules`` shows them rather than hide them): its ``key``, its
    ``field`` ("" when the whole key is unreadable) and the ``problem``."""
    found: List[Schedule] = []
    unreadable: List[Tuple[str, str, str]] = []
    for queue in app_queues(app):
        found += app.broker.schedules.listing(queue, unreadable)
    return (sorted(found, key=lambda schedule: schedule.name),
            [{"key": key, "field": field, "problem": problem}
             for key, field, problem in unreadable])
