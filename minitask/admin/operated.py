"""What an operator action needs of an app: ``Minitask`` is the one there is."""
from __future__ import annotations

from typing import Any, Dict, List, Protocol, Tuple

from ..periodic import Schedule
from ..stores.broker import Broker
from ..task import Task
from ..wire.message import Clock


class Operated(Protocol):
    """An app as the operator actions see it."""

    name: str
    clock: Clock
    max_message_bytes: int
    tasks: Dict[str, Task[Any, Any]]
    periodic_schedules: Dict[str, Schedule]

    @property
    def broker(self) -> Broker: ...

    def worker_queues(self) -> List[str]: ...


def app_queues(app: Operated) -> List[str]:
    """Every queue the app has used or declares, by name."""
    return sorted(set(app.broker.queues.queue_names()) | set(app.worker_queues()))


#: Queues a page, ``minitask status`` or ``/api/queues`` lists beyond those the app
#: declares (from the app's queue registry, which anyone with Redis access can fill):
#: what they cost stays the same with 10 queues in the registry or 20,000.
SHOWN_OTHERS = 100


def lookup_queues(app: Operated) -> List[str]:
    """Every queue the app has used or declares, those it declares first (where a
    task looked up by its id alone is likeliest), then the others by name."""
    declared = app.worker_queues()
    taken = set(declared)
    return declared + [queue for queue in app.broker.queues.queue_names()
                       if queue not in taken]


def shown_queues(app: Operated, others: int = SHOWN_OTHERS) -> Tuple[List[str], int]:
    """The queues a listing shows, by name: those the app declares, and at most
    ``others`` more from the app's queue registry; and how many it leaves out."""
    declared = set(app.worker_queues())
    rest = [queue for queue in app.broker.queues.queue_names() if queue not in declared]
    return sorted(declared | set(rest[:others])), max(0, len(rest) - others)
