"""Task: a registered function, its options, and the ways to enqueue it."""
from __future__ import annotations

import base64
import datetime as _dt
import inspect
import os
import sys
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Generic, Iterable, List, Optional,
                    Sequence, Tuple, Type, TypeVar, Union)

from ._compat import ParamSpec
from .errors import ArgumentError, ConfigurationError
from .handle import TaskHandle
from .message import Message, to_ms
from .sending import Sender, check_queue_name

P = ParamSpec("P")
R = TypeVar("R")

TASK_OPTIONS = frozenset({"name", "queue", "priority", "retries", "retry_backoff",
                          "retry_backoff_max", "retry_on", "timeout", "ignore_result",
                          "result_ttl"})
CALL_OPTIONS = frozenset({"queue", "priority", "delay", "eta", "task_id"})


def new_task_id() -> str:
    """22 url-safe characters of randomness: shorter than a hex uuid4, just as unique."""
    return base64.urlsafe_b64encode(os.urandom(16))[:22].decode("ascii")


def _positional_arity(signature: inspect.Signature) -> Optional[Tuple[int, int]]:
    """(required, total) when every parameter may be passed by position: then a call
    with positional arguments only binds exactly when their count is in that range,
    and ``Signature.bind``, a large share of ``delay()``, can be skipped."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = list(signature.parameters.values())
    if any(p.kind not in positional for p in parameters):
        return None
    required = sum(1 for p in parameters if p.default is inspect.Parameter.empty)
    return required, len(parameters)


def check_priority(priority: Any, where: str) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 9:
        raise ConfigurationError(f"{where}: priority must be an int from 0 to 9 "
                                 f"(9 runs first), got {priority!r}")
    return priority


def module_name_of(func: Callable[..., Any]) -> str:
    """The module name ``func`` would have if imported, even when run as a script."""
    module = func.__module__
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name).rsplit(".__main__", 1)[0]
    path = os.path.abspath(getattr(main, "__file__", "") or "")
    for root in sorted((os.path.abspath(p) for p in sys.path if p), key=len, reverse=True):
        if path.startswith(root + os.sep):
            relative = os.path.splitext(os.path.relpath(path, root))[0]
            return relative.replace(os.sep, ".")
    return os.path.splitext(os.path.basename(path))[0] or module


@dataclass(frozen=True)
class TaskOptions:
    """A task's resolved options; checked once, when the decorator runs."""

    name: str
    queue: str
    priority: int = 5
    retries: int = 0
    retry_backoff: float = 1.0
    retry_backoff_max: float = 600.0
    retry_on: Tuple[Type[BaseException], ...] = ()
    timeout: Optional[float] = None
    ignore_result: bool = False
    result_ttl: float = 86400.0

    @classmethod
    def build(cls, func: Callable[..., Any], default_queue: str, result_ttl: float,
              options: Dict[str, Any]) -> "TaskOptions":
        unknown = sorted(set(options) - TASK_OPTIONS)
        name = options.get("name") or f"{module_name_of(func)}.{func.__qualname__}"
        where = f"task {name!r}"
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) {', '.join(unknown)}; "
                                     f"valid options are {', '.join(sorted(TASK_OPTIONS))}")
        retries = options.get("retries", 0)
        if not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"{where}: retries must be an int >= 0, got {retries!r}")
        retry_on = options.get("retry_on")
        if retry_on is None:
            retry_on = (Exception,) if retries > 0 else ()
        elif isinstance(retry_on, type):
            retry_on = (retry_on,)
        elif not isinstance(retry_on, (tuple, list)):
            raise ConfigurationError(f"{where}: retry_on must be exception types, "
                                     f"got {retry_on!r}")
        retry_on = tuple(retry_on)
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry_on):
            raise ConfigurationError(f"{where}: retry_on must be exception types, "
                                     f"got {retry_on!r}")
        timeout = options.get("timeout")
        for field_name in ("retry_backoff", "retry_backoff_max", "timeout", "result_ttl"):
            value = options.get(field_name)
            if value is not None and (not isinstance(value, (int, float)) or value < 0
                                      or isinstance(value, bool)):
                raise ConfigurationError(f"{where}: {field_name} must be a number of "
                                         f"seconds >= 0, got {value!r}")
        queue = options.get("queue") or default_queue
        return cls(
            name=name, queue=queue,
            priority=check_priority(options.get("priority", 5), where),
            retries=retries,
            retry_backoff=float(options.get("retry_backoff", 1.0)),
            retry_backoff_max=float(options.get("retry_backoff_max", 600.0)),
            retry_on=retry_on,
            timeout=float(timeout) if timeout is not None else None,
            ignore_result=bool(options.get("ignore_result", False)),
            result_ttl=float(options.get("result_ttl", result_ttl)))


class Task(Generic[P, R]):
    """A function registered with ``@app.task``; call it to run it in-process."""

    def __init__(self, sender: Sender, func: Callable[P, R], options: TaskOptions) -> None:
        self._sender = sender
        self.func = func
        self.options = options
        self.name = options.name
        self.queue = options.queue
        self.priority = options.priority
        self._signature = inspect.signature(func)
        self._arity = _positional_arity(self._signature)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue!r} priority={self.priority}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    # -- enqueueing --------------------------------------------------------------

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run as soon as a worker is free.

        Returns:
            A handle on the enqueued call.

        Raises:
            ArgumentError: the arguments do not fit the function (a TypeError).
            EncodeError: an argument is not a msgpack type (a TypeError).
            MessageTooLarge: the message is over ``max_message_bytes``.
            BrokerError: Redis could not be reached; nothing was enqueued.
        """
        return self._send([self._message(args, kwargs, self.queue, self.priority, None, None)])[0]

    def apply_in(self, seconds: float, /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``seconds`` from now (<= 0: now).

        Raises:
            The same errors as ``delay``.
        """
        eta_ms = self._sender.clock.now_ms() + to_ms(seconds) if seconds > 0 else None
        return self._send([self._message(args, kwargs, self.queue, self.priority, eta_ms,
                                         None)])[0]

    def apply_at(self, when: Union[_dt.datetime, float], /, *args: P.args,
                 **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``when``.

        Args:
            when: an aware ``datetime`` or a Unix timestamp in seconds.

        Raises:
            ConfigurationError: ``when`` is a naive datetime.
            The same errors as ``delay``.
        """
        return self._send([self._message(args, kwargs, self.queue, self.priority,
                                         self._eta_ms(when), None)])[0]

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    *, queue: Optional[str] = None, priority: Optional[int] = None,
                    delay: Optional[float] = None,
                    eta: Union[_dt.datetime, float, None] = None,
                    task_id: Optional[str] = None, **unknown: Any) -> TaskHandle[R]:
        """Enqueue a call with per-call options that override the decorator's.

        Args:
            args: positional arguments of the function.
            kwargs: keyword arguments of the function.
            queue: the queue to put it in.
            priority: 0..9, 9 runs first.
            delay: seconds from now before it may run.
            eta: an aware datetime or Unix timestamp before which it does not run.
            task_id: the id to use; an id already pending is not enqueued twice.

        Raises:
            ConfigurationError: an unknown option or a bad priority (a ValueError).
            The same errors as ``delay``.
        """
        if unknown:
            raise ConfigurationError(f"task {self.name!r}: unknown option(s) "
                                     f"{', '.join(sorted(unknown))} for apply_async; valid "
                                     f"options are {', '.join(sorted(CALL_OPTIONS))}")
        queue = queue or self.queue
        check_queue_name(queue)
        if priority is None:
            priority = self.priority
        else:
            priority = check_priority(priority, f"task {self.name!r}")
        eta_ms: Optional[int] = None
        if eta is not None:
            eta_ms = self._eta_ms(eta)
        elif delay is not None and delay > 0:
            eta_ms = self._sender.clock.now_ms() + to_ms(delay)
        if task_id is not None and (not isinstance(task_id, str) or not task_id):
            raise ConfigurationError(f"task {self.name!r}: task_id must be a non-empty str, "
                                     f"got {task_id!r}")
        message = self._message(tuple(args), dict(kwargs or {}), queue, priority, eta_ms, task_id)
        return self._send([message])[0]

    def delay_many(self, calls: Iterable[Sequence[Any]]) -> List[TaskHandle[R]]:
        """Enqueue many calls in as few round trips as possible.

        Args:
            calls: one tuple of positional arguments per call.

        Returns:
            One handle per call, in order.

        Raises:
            The same errors as ``delay``; every call is checked before any is sent.
        """
        messages = [self._message(tuple(args), {}, self.queue, self.priority, None, None)
                    for args in calls]
        return self._send(messages)

    # -- internals ---------------------------------------------------------------

    def _eta_ms(self, when: Union[_dt.datetime, float]) -> int:
        if isinstance(when, _dt.datetime):
            if when.tzinfo is None or when.utcoffset() is None:
                raise ConfigurationError(f"task {self.name!r}: eta {when!r} is a naive "
                                         f"datetime; give it a time zone")
            return to_ms(when.timestamp())
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            return to_ms(float(when))
        raise ConfigurationError(f"task {self.name!r}: eta must be an aware datetime or a "
                                 f"Unix timestamp, got {when!r}")

    def _message(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue: str, priority: int,
                 eta_ms: Optional[int], task_id: Optional[str]) -> Message:
        arity = self._arity
        try:
            if kwargs or arity is None or not arity[0] <= len(args) <= arity[1]:
                self._signature.bind(*args, **kwargs)  # the full check, and its message
        except TypeError as exc:
            raise ArgumentError(f"task {self.name!r}: {exc}", task_name=self.name) from None
        now_ms = self._sender.clock.now_ms()
        if eta_ms is not None and eta_ms <= now_ms:
            eta_ms = None
        return Message(id=task_id or new_task_id(), task=self.name, args=list(args),
                       kwargs=kwargs, queue=queue, priority=priority, enqueued_at_ms=now_ms,
                       eta_ms=eta_ms)

    def _send(self, messages: List[Message]) -> List[TaskHandle[R]]:
        self._sender.send(messages)
        return self._sender.handles(messages, to_ms(self.options.result_ttl))
