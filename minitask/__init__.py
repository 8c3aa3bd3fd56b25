"""minitask: a Celery-style task framework for Python on Redis."""
from __future__ import annotations

from .admin import DeadTask
from .app import Minitask
from .broadcast import BroadcastHandle, Subscriber
from .canvas import Signature, chain, chord, group
from .context import TaskContext, current_task
from .errors import (AppNotFound, ArgumentError, BatchNotSent, BrokerError, ConfigurationError,
                     DecodeError, DuplicateTaskError, DurabilityError, EncodeError,
                     MessageTooLarge, MinitaskError, ResultTimeout, ResultTooLarge, Retry,
                     SerializationError,
                     SoftTimeLimitExceeded, TaskFailed, TimeLimitExceeded, UnknownTaskError)
from .groups import GroupHandle
from .handle import TaskHandle
from .periodic import Schedule
from .task import AsyncTask, Task
from .wire.message import Progress
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "AppNotFound",
    "ArgumentError",
    "AsyncTask",
    "BatchNotSent",
    "BroadcastHandle",
    "BrokerError",
    "ConfigurationError",
    "DeadTask",
    "DecodeError",
    "DuplicateTaskError",
    "DurabilityError",
    "EncodeError",
    "GroupHandle",
    "MessageTooLarge",
    "Minitask",
    "MinitaskError",
    "Progress",
    "ResultTimeout",
    "ResultTooLarge",
    "Retry",
    "Schedule",
    "SerializationError",
    "Signature",
    "SoftTimeLimitExceeded",
    "Subscriber",
    "Task",
    "TaskContext",
    "TaskFailed",
    "TaskHandle",
    "TimeLimitExceeded",
    "UnknownTaskError",
    "Worker",
    "__version__",
    "chain",
    "chord",
    "current_task",
    "group",
]
