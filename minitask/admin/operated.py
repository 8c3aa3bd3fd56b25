"""What an operator action needs of an app: ``Minitask`` is the one there is."""
from __future__ import annotations

import difflib
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from ..errors import ConfigurationError
from ..periodic import Schedule
from ..sending import check_queue_name
from ..stores.names import registered
from ..stores.broker import Broker
from ..task import Task
from ..wire.message import Clock


class Operated(Protocol):
    """An app as the operator actions see it."""

    name: str
    clock: Clock
    max_message_bytes: int
    recent_outcomes: int
    tasks: Dict[str, Task[Any, Any]]
    periodic_schedules: Dict[str, Schedule]

    @property
    def broker(self) -> Broker: ...

    def worker_queues(self) -> List[str]: ...


def meant(word: str, words: Sequence[str], cutoff: float = 0.75) -> str:
    """``"; did you mean 'x'?"`` for the one of ``words`` closest to ``word``, if one
    is close (difflib's ratio at least ``cutoff``, case aside); '' otherwise. Said by
    every refusal of a word that is not one of a known few (a queue, a command, an
    action)."""
    lowered = {each.lower(): each for each in reversed(words)}  # the first of a case
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=cutoff)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


def app_queues(app: Operated) -> List[str]:
    """Every queue the app has used or declares, by name."""
    return sorted(set(app.broker.queues.queue_names()) | set(app.worker_queues()))


#: Queues an error about a queue the app has not names (the rest are counted).
NAMED_QUEUES = 20


def known_queue(app: Operated, queue: str, what: str) -> str:
    """``queue`` if it is a queue the app has (declares or has used, or a broadcast
    lane of one, ``queue:subscriber``): an action on a mistyped one would find
    nothing and say "0", as if it had acted (probe 13 L3c).

    Raises:
        ConfigurationError: the name is invalid, or no queue of the app has it
            (naming ``what``, if any, the queue, the closest of the app's and its
            queues).
    """
    for part in queue.split(":", 1) if isinstance(queue, str) else [queue]:
        check_queue_name(part)  # a broadcast lane is queue:subscriber
    store = app.broker.queues
    if queue not in app.worker_queues() and not registered(
            store.transport, (store.app_keys.queues, store.app_keys.lanes), queue):
        known = app_queues(app)
        listed = ", ".join(known[:NAMED_QUEUES]) + (
            f" and {len(known) - NAMED_QUEUES:,} more" if len(known) > NAMED_QUEUES else "")
        raise ConfigurationError(f"{what}{': ' if what else ''}app {app.name!r} has no "
                                 f"queue {queue!r}"
                                 f"{meant(queue, known)}; its queues: {listed or 'none'}")
    return queue


#: Queues a page, ``minitask status`` or ``/api/queues`` lists beyond those the app
#: declares (from the app's queue registry, which anyone with Redis access can fill):
#: what they cost stays the same with 10 queues in the registry or 20,000.
SHOWN_OTHERS = 100


#: Queues a lookup by id alone (inspect, dead show, requeue, purge) and the listing of
#: dead letters ask beyond those the app declares: at most this many more from the
#: app's queue registry (two round trips of ``FIND_BATCH``); how many it did not ask
#: is said (``lookup_queues``).
LOOKUP_OTHERS = 1000


def lookup_queues(app: Operated) -> Tuple[List[str], int]:
    """The queues a lookup by id alone asks: those the app declares first (where a task
    is likeliest), then at most ``LOOKUP_OTHERS`` others of its queue registry (as
    Redis keeps them, not all read: ``stores/names.py``); and how many more the
    registry holds, not asked."""
    declared, rest, left = _declared_and_others(app, LOOKUP_OTHERS)
    return declared + rest[:LOOKUP_OTHERS], max(0, len(rest) - LOOKUP_OTHERS) + left


def shown_queues(app: Operated, others: int = SHOWN_OTHERS,
                 invalid: Optional[List[int]] = None) -> Tuple[List[str], int]:
    """The queues a listing shows, by name: those the app declares, and at most
    ``others`` more from the app's queue registry; and how many members of the registry
    it leaves out (not read, or naming no queue: left out, said in the log; those naming
    none are added to ``invalid[0]``, the rest are past the ``others`` shown)."""
    declared, rest, left = _declared_and_others(app, others, invalid)
    return (sorted(set(declared) | set(rest[:others])), max(0, len(rest) - others) + left)


def _declared_and_others(app: Operated, others: int, invalid: Optional[List[int]] = None
                         ) -> Tuple[List[str], List[str], int]:
    """The queues the app declares, and at most ``others`` others of its queue registry
    (of ``others`` + declared read); and how many registry members were not read or
    name no queue."""
    declared = app.worker_queues()
    taken = set(declared)
    names, left = app.broker.queues.queue_registry(others + len(declared), declared, invalid)
    return declared, [queue for queue in names if queue not in taken], left
