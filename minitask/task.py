"""Task: a registered function, its options, and the ways to enqueue it."""
from __future__ import annotations

import base64
import datetime as _dt
import inspect
import math
import os
import reprlib
import sys
from dataclasses import dataclass
from typing import (Any, Callable, Coroutine, Dict, Generic, Iterable, List, Optional,
                    Protocol, Sequence, Tuple, Type, TypeVar, Union, overload)

from ._compat import ParamSpec
from .canvas import Signature
from .errors import ArgumentError, ConfigurationError
from .handle import TaskHandle
from .message import (MAX_MS, MAX_RETRIES, MAX_SECONDS, Message, describe_char, to_ms,
                      unprintable)
from .sending import Sender, check_queue_name

P = ParamSpec("P")
R = TypeVar("R")

TASK_OPTIONS = frozenset({"name", "queue", "priority", "retries", "retry_backoff",
                          "retry_backoff_max", "retry_on", "timeout", "ignore_result",
                          "result_ttl"})
CALL_OPTIONS = frozenset({"queue", "priority", "delay", "eta", "task_id"})
#: Options given in seconds, checked to be finite, >= 0 and at most MAX_SECONDS.
_SECONDS_OPTIONS = ("retry_backoff", "retry_backoff_max", "timeout", "result_ttl")


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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_seconds(value: Any, what: str, where: str) -> float:
    """A duration option: a finite number of seconds from 0 to MAX_SECONDS."""
    if not _is_number(value) or not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise ConfigurationError(f"{where}: {what} must be a finite number of seconds from 0 "
                                 f"to {MAX_SECONDS} (100 years), got {value!r}")
    return float(value)


def check_text(value: Any, what: str, where: str, fix: str = "use printable characters") -> str:
    """A task name or task id: a non-empty str that cannot forge a log line."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{where}: {what} must be a non-empty str, got {value!r}")
    char = unprintable(value)
    if char is not None:
        raise ConfigurationError(f"{where}: {what} {value!r} holds {describe_char(char)}, a "
                                 f"control or format character; {fix}")
    return value


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
        name = options.get("name")
        if name is None:
            name = check_text(f"{module_name_of(func)}.{func.__qualname__}", "default name",
                              f"@app.task on {func.__qualname__!r}", "pass name=...")
        else:
            check_text(name, "name", f"@app.task on {func.__qualname__!r}")
        where = f"task {name!r}"
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) {', '.join(unknown)}; "
                                     f"valid options are {', '.join(sorted(TASK_OPTIONS))}")
        retries = options.get("retries", 0)
        if (not isinstance(retries, int) or isinstance(retries, bool)
                or not 0 <= retries <= MAX_RETRIES):
            raise ConfigurationError(f"{where}: retries must be an int from 0 to "
                                     f"{MAX_RETRIES}, got {retries!r}")
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
        seconds = {field_name: check_seconds(options[field_name], field_name, where)
                   for field_name in _SECONDS_OPTIONS if options.get(field_name) is not None}
        if "result_ttl" not in seconds:
            seconds["result_ttl"] = check_seconds(result_ttl, "result_ttl (the app's)", where)
        ignore_result = options.get("ignore_result", False)
        if not isinstance(ignore_result, bool):
            raise ConfigurationError(f"{where}: ignore_result must be True or False, "
                                     f"got {ignore_result!r}")
        queue = options.get("queue") or default_queue
        return cls(
            name=name, queue=queue,
            priority=check_priority(options.get("priority", 5), where),
            retries=retries,
            retry_backoff=seconds.get("retry_backoff", 1.0),
            retry_backoff_max=seconds.get("retry_backoff_max", 600.0),
            retry_on=retry_on,
            timeout=seconds.get("timeout"),
            ignore_result=ignore_result,
            result_ttl=seconds["result_ttl"])


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

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """``delay``, awaited: the same checks, then a write on ``redis.asyncio``.

        Raises:
            The same errors as ``delay``.
        """
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 None, None)]))[0]

    def apply_in(self, seconds: float, /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``seconds`` from now (<= 0: now).

        Raises:
            ConfigurationError: ``seconds`` is not a finite number, or ends after
                year 9999 (a ValueError).
            The same errors as ``delay``.
        """
        eta_ms = self._delay_ms(seconds, "apply_in")
        return self._send([self._message(args, kwargs, self.queue, self.priority, eta_ms,
                                         None)])[0]

    async def aapply_in(self, seconds: float, /, *args: P.args,
                        **kwargs: P.kwargs) -> TaskHandle[R]:
        """``apply_in``, awaited.

        Raises:
            The same errors as ``apply_in``.
        """
        eta_ms = self._delay_ms(seconds, "apply_in")
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 eta_ms, None)]))[0]

    def apply_at(self, when: Union[_dt.datetime, float], /, *args: P.args,
                 **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``when``.

        Args:
            when: an aware ``datetime`` or a Unix timestamp in seconds.

        Raises:
            ConfigurationError: ``when`` is a naive datetime, not a finite number, or
                after year 9999 (a ValueError).
            The same errors as ``delay``.
        """
        return self._send([self._message(args, kwargs, self.queue, self.priority,
                                         self._eta_ms(when), None)])[0]

    async def aapply_at(self, when: Union[_dt.datetime, float], /, *args: P.args,
                        **kwargs: P.kwargs) -> TaskHandle[R]:
        """``apply_at``, awaited.

        Raises:
            The same errors as ``apply_at``.
        """
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 self._eta_ms(when), None)]))[0]

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    *, queue: Optional[str] = None, priority: Optional[int] = None,
                    delay: Optional[float] = None,
                    eta: Union[_dt.datetime, float, None] = None,
                    task_id: Optional[str] = None, **unknown: Any) -> TaskHandle[R]:
        """Enqueue a call with per-call options that override the decorator's.

        Args:
            args: positional arguments of the function: a tuple or list (None: none).
            kwargs: keyword arguments of the function: a dict (None: none).
            queue: the queue to put it in.
            priority: 0..9, 9 runs first.
            delay: seconds from now before it may run.
            eta: an aware datetime or Unix timestamp before which it does not run.
            task_id: the id to use; an id already pending is not enqueued twice.

        Raises:
            ConfigurationError: an unknown option, or a bad queue, priority, delay, eta
                or task_id (a ValueError).
            ArgumentError: ``args`` is not a tuple or list, or ``kwargs`` not a dict
                with str keys (a TypeError).
            The same errors as ``delay``.
        """
        message = self._call_message(args, kwargs, queue, priority, delay, eta, task_id, unknown)
        return self._send([message])[0]

    async def aapply_async(self, args: Sequence[Any] = (),
                           kwargs: Optional[Dict[str, Any]] = None, *,
                           queue: Optional[str] = None, priority: Optional[int] = None,
                           delay: Optional[float] = None,
                           eta: Union[_dt.datetime, float, None] = None,
                           task_id: Optional[str] = None, **unknown: Any) -> TaskHandle[R]:
        """``apply_async``, awaited.

        Raises:
            The same errors as ``apply_async``.
        """
        return (await self._asend([self._call_message(args, kwargs, queue, priority, delay,
                                                      eta, task_id, unknown)]))[0]

    def _call_message(self, args: Any, kwargs: Any, queue: Optional[str],
                      priority: Optional[int], delay: Optional[float], eta: Any,
                      task_id: Optional[str], unknown: Dict[str, Any]) -> Message:
        """The message of an ``apply_async`` call, every option checked."""
        where = f"task {self.name!r}"
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) "
                                     f"{', '.join(sorted(unknown))} for apply_async; valid "
                                     f"options are {', '.join(sorted(CALL_OPTIONS))}")
        if args is None:
            args = ()
        elif not isinstance(args, (tuple, list)):
            raise ArgumentError(f"{where}: apply_async args must be a tuple or list of "
                                f"positional arguments, got {reprlib.repr(args)} "
                                f"({type(args).__name__}); for a single argument write "
                                f"args=(value,)", task_name=self.name)
        if kwargs is None:
            kwargs = {}
        elif not isinstance(kwargs, dict):
            raise ArgumentError(f"{where}: apply_async kwargs must be a dict of keyword "
                                f"arguments, got {reprlib.repr(kwargs)} "
                                f"({type(kwargs).__name__})", task_name=self.name)
        else:
            for key in kwargs:
                if not isinstance(key, str):
                    raise ArgumentError(f"{where}: apply_async kwargs keys must be str "
                                        f"(argument names), got {reprlib.repr(key)}",
                                        task_name=self.name)
        queue = self.queue if queue is None else queue
        check_queue_name(queue)
        if priority is None:
            priority = self.priority
        else:
            priority = check_priority(priority, where)
        eta_ms: Optional[int] = None
        if eta is not None:
            eta_ms = self._eta_ms(eta)
        elif delay is not None:
            eta_ms = self._delay_ms(delay, "delay")
        if task_id is not None:
            check_text(task_id, "task_id", where)
        return self._message(tuple(args), dict(kwargs), queue, priority, eta_ms, task_id)

    def delay_many(self, calls: Iterable[Sequence[Any]]) -> List[TaskHandle[R]]:
        """Enqueue many calls in as few round trips as possible.

        Args:
            calls: one tuple of positional arguments per call.

        Returns:
            One handle per call, in order.

        Raises:
            ArgumentError: ``calls`` is not iterable, or one call is not a tuple or
                list (a TypeError).
            The same errors as ``delay``; every call is checked before any is sent.
        """
        return self._send(self._many_messages(calls))

    async def adelay_many(self, calls: Iterable[Sequence[Any]]) -> List[TaskHandle[R]]:
        """``delay_many``, awaited.

        Raises:
            The same errors as ``delay_many``.
        """
        return await self._asend(self._many_messages(calls))

    def _many_messages(self, calls: Iterable[Sequence[Any]]) -> List[Message]:
        where = f"task {self.name!r}"
        try:
            each = iter(calls)
        except TypeError:
            raise ArgumentError(f"{where}: delay_many takes an iterable of argument tuples, "
                                f"got {reprlib.repr(calls)}", task_name=self.name) from None
        messages = []
        for index, args in enumerate(each):
            if not isinstance(args, (tuple, list)):
                raise ArgumentError(
                    f"{where}: delay_many takes one tuple (or list) of positional arguments "
                    f"per call; call {index} is {reprlib.repr(args)} ({type(args).__name__}); "
                    f"write (value,) for a single argument, and use apply_async(args, "
                    f"kwargs) for keyword arguments", task_name=self.name)
            messages.append(self._message(tuple(args), {}, self.queue, self.priority, None,
                                          None))
        return messages

    # -- internals ---------------------------------------------------------------

    def _delay_ms(self, seconds: Any, what: str) -> Optional[int]:
        """The due time ``seconds`` from now in ms, or None (<= 0 means now)."""
        if not _is_number(seconds) or not math.isfinite(seconds):
            raise ConfigurationError(f"task {self.name!r}: {what} takes a finite number of "
                                     f"seconds, got {reprlib.repr(seconds)}")
        if seconds <= 0:
            return None
        now_ms = self._sender.clock.now_ms()
        if seconds > (MAX_MS - now_ms) / 1000.0:
            raise ConfigurationError(f"task {self.name!r}: {what} of {seconds!r} seconds ends "
                                     f"after year 9999; give a nearer time")
        return now_ms + to_ms(seconds)

    def _eta_ms(self, when: Any) -> int:
        """Unix ms of an aware datetime or a timestamp (0 for any time before 1970)."""
        if isinstance(when, _dt.datetime):
            if when.tzinfo is None or when.utcoffset() is None:
                raise ConfigurationError(f"task {self.name!r}: eta {when!r} is a naive "
                                         f"datetime; give it a time zone")
            seconds = when.timestamp()
        elif _is_number(when) and math.isfinite(when):
            seconds = float(when)
        else:
            raise ConfigurationError(f"task {self.name!r}: eta must be an aware datetime or "
                                     f"a finite Unix timestamp, got {reprlib.repr(when)}")
        if seconds > MAX_MS / 1000.0:
            raise ConfigurationError(f"task {self.name!r}: eta {when!r} is after the end of "
                                     f"year 9999; give a nearer time")
        return to_ms(seconds) if seconds > 0 else 0

    def _message(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue: str, priority: int,
                 eta_ms: Optional[int], task_id: Optional[str]) -> Message:
        arity = self._arity
        try:
            if kwargs or arity is None or not arity[0] <= len(args) <= arity[1]:
                self._signature.bind(*args, **kwargs)  # the full check, and its message
        except TypeError as exc:
            raise ArgumentError(f"task {self.name!r}: {exc}{self._misplaced_options(kwargs)}",
                                task_name=self.name) from None
        now_ms = self._sender.clock.now_ms()
        if eta_ms is not None and eta_ms <= now_ms:
            eta_ms = None
        return Message(id=task_id or new_task_id(), task=self.name, args=list(args),
                       kwargs=kwargs, queue=queue, priority=priority, enqueued_at_ms=now_ms,
                       eta_ms=eta_ms)

    def _misplaced_options(self, kwargs: Dict[str, Any]) -> str:
        """Say where an option given as a keyword argument of the function belongs."""
        parameters = self._signature.parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return ""
        unexpected = [key for key in kwargs if key not in parameters]
        per_call = [key for key in unexpected if key in CALL_OPTIONS]
        per_task = [key for key in unexpected if key in TASK_OPTIONS - CALL_OPTIONS]
        hints = []
        if per_call:
            given = ", ".join(f"{key}={reprlib.repr(kwargs[key])}" for key in per_call)
            hints.append(f"{', '.join(per_call)} is an option of the call, not an argument "
                         f"of the function: use apply_async(args, kwargs, {given})")
        if per_task:
            given = ", ".join(f"{key}=..." for key in per_task)
            hints.append(f"{', '.join(per_task)} is an option of the task: set it with "
                         f"@app.task({given})")
        return "".join(f"; {hint}" for hint in hints)

    # -- workflows (minitask.canvas) ------------------------------------------------

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of this task, for chains, groups and chords.

        The result of the step before it is prepended to ``args`` when it runs;
        arguments are checked when the workflow is sent, as ``delay()`` checks them.
        """
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: it does not receive the result of the step before it."""
        return Signature(self, args, kwargs, immutable=True)

    @property
    def sender(self) -> Sender:
        """What this task enqueues through (its app's)."""
        return self._sender

    def check_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        """Raise ArgumentError unless the arguments bind to the function (a workflow
        step's check; a step's previous result stands in as a placeholder)."""
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"task {self.name!r}: {exc}{self._misplaced_options(kwargs)}",
                                task_name=self.name) from None

    def call_options(self, options: Dict[str, Any]) -> Dict[str, Any]:
        """Per-call options of a workflow step, checked: ``queue``, ``priority``,
        ``delay`` (seconds after the step is sent), ``eta``, ``task_id``.

        Returns:
            ``queue``, ``priority``, ``delay_ms``, ``eta_ms`` (None: not given),
            ``task_id`` (None: a new one).

        Raises:
            ConfigurationError: an unknown option or a bad value (a ValueError).
        """
        where = f"task {self.name!r}"
        unknown = sorted(set(options) - CALL_OPTIONS)
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) {', '.join(unknown)} for a "
                                     f"signature; valid options are "
                                     f"{', '.join(sorted(CALL_OPTIONS))}")
        queue = options.get("queue", self.queue)
        check_queue_name(queue)
        priority = options.get("priority")
        priority = self.priority if priority is None else check_priority(priority, where)
        delay = options.get("delay")
        delay_ms = None if delay is None else to_ms(check_seconds(delay, "delay", where))
        eta = options.get("eta")
        task_id = options.get("task_id")
        if task_id is not None:
            check_text(task_id, "task_id", where)
        return {"queue": queue, "priority": priority, "delay_ms": delay_ms or None,
                "eta_ms": None if eta is None else self._eta_ms(eta), "task_id": task_id}

    def _send(self, messages: List[Message]) -> List[TaskHandle[R]]:
        self._sender.send(messages)
        return self._sender.handles(messages, to_ms(self.options.result_ttl))

    async def _asend(self, messages: List[Message]) -> List[TaskHandle[R]]:
        await self._sender.asend(messages)
        return self._sender.handles(messages, to_ms(self.options.result_ttl))


class AsyncTask(Task[P, R]):
    """A task whose function is an ``async def``: ``delay(...).get()`` gives what
    its coroutine returns, and calling it returns the coroutine, as the function does.

    Workers run it on an event loop: the asyncio pool awaits it beside others,
    the thread and process pools run one ``asyncio.run`` per attempt.
    """

    def __init__(self, sender: Sender, func: Callable[P, Coroutine[Any, Any, R]],
                 options: TaskOptions) -> None:
        super().__init__(sender, func, options)  # type: ignore[arg-type]

    def __call__(self,  # type: ignore[override]
                 *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.func(*args, **kwargs)  # type: ignore[return-value]


class TaskDecorator(Protocol):
    """What ``@app.task(...)`` with options returns: it makes a ``Task``, or an
    ``AsyncTask`` of an ``async def``."""

    @overload
    def __call__(self, func: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> Task[P, R]: ...
