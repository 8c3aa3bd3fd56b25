"""A queue's counts, and purging what is ready."""
from __future__ import annotations

from typing import Any, Dict, Sequence

from ..sending import check_queue_name
from .operated import Operated


def queue_counts(app: Operated, queue: str) -> Dict[str, Any]:
    """A queue's counts (``QueueStore.counts``) with the tasks its limits park counted
    as ready: they wait for a rate or a ``max_running`` slot, not for a time.

    ``parked`` says how many of ``ready`` those are, when some are; they are not in
    ``ready_by_priority``, which counts the ready lists. Grouped ready tasks (fair
    queues) count in ``ready`` too (a solo group's task of no limits in
    ``ready_by_priority`` too: its group's token counts it), and then ``grouped``
    says how many they are, ``groups`` in how many groups, ``largest_groups`` the
    largest backlogs. A queue
    with paused groups has ``paused_groups`` (how many) and ``paused_shown`` (at most
    ``PAUSED_SHOWN`` of them, as (group, ready tasks)): their tasks count as ready,
    held until ``resume_group``. ``dead_trimmed``, when some were, says how many dead
    letters the app's bounds deleted, oldest first (``dead_letters_max``,
    ``dead_letters_ttl``)."""
    return all_queue_counts(app, [queue])[queue]


#: Paused groups named per queue (a count says how many there are).
PAUSED_SHOWN = 10


def all_queue_counts(app: Operated, queues: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """``queue_counts`` of each queue, in eight round trips whatever their number."""
    found = app.broker.queues.counts_many(queues)
    for queue, parked in app.broker.flow.parked_many(queues).items():
        if parked:
            found[queue]["ready"] += parked
            found[queue]["parked"] = parked
    # fair queues: grouped ready tasks wait in their groups, not in the ready lists
    # (but for solo groups' tasks, which their tokens count there: ``solo``)
    for queue, groups in app.broker.flow.group_counts_many(queues).items():
        found[queue]["ready"] += groups["grouped"] - groups.pop("solo", 0)
        found[queue].update(groups)
    for queue, paused in app.broker.flow.paused_many(queues, PAUSED_SHOWN).items():
        found[queue].update(paused)
    for queue, trimmed in app.broker.dead.trimmed_many(queues).items():
        if trimmed:
            found[queue]["dead_trimmed"] = trimmed
    return found


def purge_ready(app: Operated, queue: str) -> int:
    """Delete every ready task of ``queue``; scheduled, running and dead ones stay.

    Returns:
        How many were deleted. Their status becomes ``unknown``.

    Raises:
        ConfigurationError: the queue name is invalid.
        BrokerError: Redis could not be reached.
    """
    check_queue_name(queue)
    return app.broker.admin.purge_ready(queue)
