"""What the worker needs of the app it runs tasks for, and of a task.

Structural types only, so that imports point one way (the app imports the
worker, never the reverse); ``Minitask`` and ``Task`` satisfy them as they are.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Sequence, Tuple, Type

from ..hooks import Hooks
from ..stores.broker import Broker
from ..wire.message import Clock


class TaskSettings(Protocol):
    """The options of a task that decide how its attempts run and end."""

    @property
    def retries(self) -> int: ...

    @property
    def retry_backoff(self) -> float: ...

    @property
    def retry_backoff_max(self) -> float: ...

    @property
    def retry_on(self) -> Tuple[Type[BaseException], ...]: ...

    @property
    def timeout(self) -> Optional[float]: ...

    @property
    def soft_timeout(self) -> Optional[float]: ...

    @property
    def ignore_result(self) -> bool: ...

    @property
    def result_ttl(self) -> float: ...

    @property
    def queue(self) -> str: ...

    @property
    def broadcast(self) -> bool: ...


class HostedTask(Protocol):
    """A registered task as the worker runs it."""

    @property
    def name(self) -> str: ...

    @property
    def func(self) -> Callable[..., Any]: ...

    @property
    def options(self) -> TaskSettings: ...

    def check_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        """Raise ArgumentError unless the arguments bind to the function."""


class Host(Protocol):
    """The app a worker serves: its tasks, its broker, its clock and its settings."""

    @property
    def name(self) -> str: ...

    @property
    def tasks(self) -> Mapping[str, HostedTask]: ...

    @property
    def broker(self) -> Broker: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def visibility_timeout(self) -> float: ...

    @property
    def max_deliveries(self) -> int: ...

    @property
    def result_ttl(self) -> float: ...

    @property
    def prefetch(self) -> int: ...

    @property
    def max_result_bytes(self) -> int: ...

    @property
    def max_message_bytes(self) -> int: ...

    @property
    def max_result_bytes_chosen(self) -> bool: ...

    @property
    def hooks(self) -> Hooks: ...

    def check_queue_name(self, queue: str) -> None: ...
