"""Operator actions, shared by the CLI, the dashboard and ``Minitask``'s methods.

One module per concern: look a task up (``tasks``), list what is running,
scheduled or recently ended (``activity``), count and purge queues
(``queues``), see and stop workers (``workers``), dead letters (``dead``),
schedules (``scheduling``), broadcast subscribers (``subscriptions``) and the
groups of fair queues (``groups``). Each
function takes the app (anything shaped like ``Operated``) first.
"""
from __future__ import annotations

from .activity import ListedTask, Listing, recent, running, scheduled
from .dead import (HEAD_BYTES, NO_MESSAGE, NOT_DEAD, REQUEUED, REQUEUED_UNCONFIRMED, DeadRow,
                   DeadTask, dead_letter, dead_letters, dead_queue, dead_rows, find_dead,
                   purge_dead, requeue_dead, revive_dead, revive_or_refusal)
from .groups import group_counts, pause_group, resume_group, set_group_weight
from .operated import (LOOKUP_OTHERS, SHOWN_OTHERS, Operated, app_queues, known_queue,
                       lookup_queues, meant, shown_queues)
from .queues import all_queue_counts, purge_ready, queue_counts
from .scheduling import (PAGE_SIZE, SchedulePage, add_schedule, remove_schedule, schedule_counts,
                         schedule_listing, schedule_page, schedule_pages, schedules)
from .subscriptions import subscribers, unsubscribe
from .tasks import UNREADABLE, TaskInfo, inspect
from .workers import (LIVE_MS, SHOWN_WORKERS, TRUSTED_AHEAD_MS, WorkerListing, live_workers,
                      shutdown, stalled_queues, stoppable_workers, worker_listing)

__all__ = ["HEAD_BYTES", "LIVE_MS", "LOOKUP_OTHERS", "NOT_DEAD", "NO_MESSAGE", "REQUEUED",
           "SHOWN_OTHERS", "SHOWN_WORKERS", "TRUSTED_AHEAD_MS", "UNREADABLE", "DeadRow",
           "DeadTask",
           "ListedTask", "Listing", "Operated", "PAGE_SIZE", "SchedulePage", "TaskInfo",
           "WorkerListing", "add_schedule", "all_queue_counts", "app_queues",
           "dead_letter", "dead_letters", "dead_queue", "dead_rows", "find_dead",
           "group_counts", "inspect", "known_queue", "live_workers", "lookup_queues", "meant",
           "purge_dead",
           "purge_ready", "pause_group",
           "queue_counts", "recent", "remove_schedule", "requeue_dead", "resume_group",
           "revive_dead", "revive_or_refusal", "REQUEUED_UNCONFIRMED", "running",
           "schedule_counts",
           "schedule_listing",
           "schedule_page",
           "schedule_pages", "scheduled", "schedules",
           "set_group_weight", "shown_queues", "shutdown", "subscribers", "unsubscribe",
           "stalled_queues", "stoppable_workers", "worker_listing"]
