"""What an operator action needs of an app: ``Minitask`` is the one there is."""
from __future__ import annotations

from typing import Any, Dict, List, Protocol

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
