"""Every exception minitask raises, in one tree.

::

    MinitaskError
     +-- ConfigurationError (ValueError)  bad option, priority outside 0..9, no embedded broker
     |    +-- DuplicateTaskError          two tasks registered under one name
     +-- AppNotFound                      -A names nothing, or a module with no/several apps
     +-- ArgumentError (TypeError)        arguments do not bind to the task's signature
     +-- SerializationError
     |    +-- EncodeError (TypeError)     a value msgpack cannot carry; names its path
     |    +-- DecodeError                 corrupt payload or unknown envelope version
     +-- MessageTooLarge (ValueError)     encoded message over max_message_bytes
     +-- UnknownTaskError                 a message names a task this worker does not know
     +-- BrokerError                      Redis unreachable or failing (chained from redis-py)
     +-- TaskFailed                       get() on a failed task: exc_type, message, traceback
     +-- TimeLimitExceeded                an attempt ran past its timeout
     +-- ResultTimeout (TimeoutError)     get(timeout=...) ran out
     +-- Retry                            raised inside a task to ask for another attempt
"""
from __future__ import annotations


class MinitaskError(Exception):
    """Base of every minitask error."""


class ConfigurationError(MinitaskError, ValueError):
    """An app or task option is invalid, or the broker cannot be set up."""


class DuplicateTaskError(ConfigurationError):
    """Two different functions were registered under one task name."""


class AppNotFound(MinitaskError):
    """The -A argument names no app, or a module holding zero or several apps."""


class ArgumentError(MinitaskError, TypeError):
    """The arguments of a call do not bind to the task's signature."""

    def __init__(self, message: str, *, task_name: str) -> None:
        super().__init__(message)
        self.task_name = task_name


class SerializationError(MinitaskError):
    """A value could not be turned into bytes or back."""


class EncodeError(SerializationError, TypeError):
    """A value msgpack cannot carry; ``path`` says where it sits."""

    def __init__(self, message: str, *, task_name: str, path: str) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.path = path


class DecodeError(SerializationError):
    """A payload is corrupt or carries an envelope version we do not know."""


class MessageTooLarge(MinitaskError, ValueError):
    """The encoded message is over the app's ``max_message_bytes``."""

    def __init__(self, message: str, *, task_name: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.size = size
        self.limit = limit


class UnknownTaskError(MinitaskError):
    """A message names a task that this worker has not registered."""


class BrokerError(MinitaskError):
    """Redis is unreachable or answered with an error."""


class TaskFailed(MinitaskError):
    """The task ended in failure; the remote error is described on attributes."""

    def __init__(self, task_id: str, exc_type: str, message: str, traceback: str) -> None:
        super().__init__(f"task {task_id} failed: {exc_type}: {message}")
        self.task_id = task_id
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback


class TimeLimitExceeded(MinitaskError):
    """An attempt ran longer than its task's ``timeout``."""


class ResultTimeout(MinitaskError, TimeoutError):
    """``TaskHandle.get(timeout=...)`` ran out before the task finished."""


class Retry(MinitaskError):
    """Raise inside a task to ask for another attempt.

    Args:
        delay: seconds to wait before the next attempt; ``None`` uses the
            task's exponential backoff.
    """

    def __init__(self, delay: float | None = None) -> None:
        super().__init__(f"retry requested (delay={delay!r})")
        self.delay = delay
