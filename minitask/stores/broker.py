"""Broker: one app's Redis, as a transport and a store per concern.

The stores hold every operation minitask does on Redis (``minitask.stores``);
the transport (``broker.transport``) carries them. A feature with state of its
own adds a store beside these, not methods to a shared class.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union, overload

import redis

from ..broker.transport import Transport
from ..wire.types import TypeRegistry
from .admin import AdminStore
from .bounds import Bounds
from .broadcast import BroadcastStore
from .cancels import CancelStore
from .dead import DeadLetterStore
from .flow import FlowStore
from .metrics import MetricsStore
from .progress import ProgressStore
from .queue import QueueStore
from .recent import RecentStore
from .registry import WorkerRegistry
from .results import ResultStore
from .schedules import ScheduleStore
from .step_ids import StepIdStore
from .unsent import UnsentSteps
from .workflows import WorkflowStore


class Broker:
    """The stores of one app on one Redis (or Redis Cluster)."""

    def __init__(self, client: "redis.Redis | redis.RedisCluster", app_name: str,
                 description: str = "", types: Optional[TypeRegistry] = None,
                 limits: Optional[Tuple[int, int]] = None) -> None:
        self.transport = Transport(client, description)
        self.app_name = app_name
        #: The app's registered argument types: how handles and workers read values.
        self.types = types if types is not None else TypeRegistry()
        self.queues = QueueStore(self.transport, app_name)
        self.results = ResultStore(self.transport, app_name)
        self.dead = DeadLetterStore(self.transport, app_name)
        self.registry = WorkerRegistry(self.transport, app_name)
        self.admin = AdminStore(self.transport, app_name)
        self.cancels = CancelStore(self.transport, app_name)
        self.schedules = ScheduleStore(self.transport, app_name)
        self.workflows = WorkflowStore(self.transport, app_name, self.queues)
        self.broadcasts = BroadcastStore(self.transport, app_name)
        self.flow = FlowStore(self.transport, app_name, self.queues)
        self.metrics = MetricsStore(self.transport, app_name)
        self.progress = ProgressStore(self.transport, app_name)
        self.recent = RecentStore(self.transport, app_name)
        self.step_ids = StepIdStore(self.transport, app_name)
        self.unsent = UnsentSteps(self.transport, app_name, self.workflows)
        if limits is not None:  # the app's max_message_bytes and max_result_bytes
            self.bound(*limits)

    def bound(self, max_message_bytes: int, max_result_bytes: int) -> None:
        """Read no value longer than the app's limits let minitask write (a planted
        one is measured, said, and not read): ``Bounds.of`` them, for every store."""
        bounds = Bounds.of(max_message_bytes, max_result_bytes)
        for store in vars(self).values():
            if hasattr(store, "bounds"):
                store.bounds = bounds

    @property
    def client(self) -> Any:
        return self.transport.client

    @property
    def description(self) -> str:
        """Where the broker is, with any password hidden."""
        return self.transport.description

    def close(self) -> None:
        """Close every connection this broker opened, and its client's pool.

        A thread that uses the broker again later opens a new connection.
        """
        self.transport.close()


class Connected:
    """An app's ``broker``: made on first use (by the app's ``_make_broker``), then kept
    in the app's own ``__dict__``, where a read finds it before this descriptor (it has
    no ``__set__``): a worker reads it several times a task, and a property would be a
    call of Python at each read. ``keep_broker(app, None)`` drops it."""

    @overload
    def __get__(self, app: None, owner: type) -> Connected: ...

    @overload
    def __get__(self, app: Any, owner: type) -> Broker: ...

    def __get__(self, app: Any, owner: type) -> Union[Connected, Broker]:
        if app is None:
            return self
        broker = made_broker(app)
        if broker is None:
            broker = app._make_broker()
            keep_broker(app, broker)
        return broker


def made_broker(app: Any) -> Optional[Broker]:
    """The broker ``Connected`` kept for ``app``, if any."""
    return app.__dict__.get("broker")  # type: ignore[no-any-return]


def keep_broker(app: Any, broker: Optional[Broker]) -> None:
    """Keep ``broker`` as ``app``'s (None: drop it; the next use connects again)."""
    if broker is None:
        app.__dict__.pop("broker", None)
    else:
        app.__dict__["broker"] = broker
