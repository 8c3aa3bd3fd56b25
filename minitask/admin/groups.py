"""Fair queues for operators: weights, pause and resume of one group, and the
counts status and the metrics show (docs/guide/fair-queues.rst)."""
from __future__ import annotations

from typing import Any, Dict, Sequence

from ..errors import ConfigurationError
from ..limits import MAX_COUNT, group_name
from ..sending import check_queue_name
from .operated import Operated, known_queue


def _checked(app: Operated, queue: str, group: Any, what: str) -> str:
    """The group as it is stored, of a queue the app has (declares or has used): a
    weight or a pause written for a mistyped queue would hold nothing, said nowhere
    (as the listings, ``purge`` and ``dead --queue`` refuse a queue the app has not)."""
    check_queue_name(queue)
    name = group_name(group, f"{what} on queue {queue!r}", "group")
    known_queue(app, queue, what)
    return name


def set_group_weight(app: Operated, queue: str, group: Any, weight: int) -> None:
    """Give ``group`` of ``queue`` ``weight`` fetches a turn (default 1)."""
    name = _checked(app, queue, group, "set_group_weight")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_COUNT:
        raise ConfigurationError(f"set_group_weight on queue {queue!r}: the weight of group "
                                 f"{name!r} must be an int from 1 to {MAX_COUNT}, got "
                                 f"{weight!r}")
    app.broker.flow.set_group_weight(queue, name, weight)


def pause_group(app: Operated, queue: str, group: Any) -> None:
    """Hold the ready tasks of ``group`` of ``queue`` until ``resume_group``."""
    app.broker.flow.pause_group(queue, _checked(app, queue, group, "pause_group"))


def resume_group(app: Operated, queue: str, group: Any) -> bool:
    """Serve a paused group again; False when it was not paused."""
    return app.broker.flow.resume_group(queue, _checked(app, queue, group, "resume_group"))


def group_counts(app: Operated, queues: Sequence[str], largest: int = 5) -> Dict[str, Any]:
    """Per queue with grouped ready tasks: how many, in how many groups, and the
    largest backlogs by group (``FlowStore.group_counts_many``)."""
    found = app.broker.flow.group_counts_many(queues, largest)
    for counts in found.values():
        counts.pop("solo", None)  # (how many of them the ready lists count: internal)
    return found
