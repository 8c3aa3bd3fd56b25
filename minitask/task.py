"""Task: a registered function, its options, and the ways to enqueue it."""
from __future__ import annotations

import asyncio
import functools
import datetime as _dt
import inspect
import math
import reprlib
from dataclasses import replace
from typing import (Any, Callable, Coroutine, Dict, Generic, Iterable, List, Optional,
                    Protocol, Sequence, Tuple, TypeVar, Union, cast, overload)

from . import broadcast
from ._compat import ParamSpec
from .canvas import Signature
from .broker.durability import APP, CallSetting
from .errors import ArgumentError, ConfigurationError
from .handle import TaskHandle
from .limits import CALL_OPTIONS as FLOW_OPTIONS
from .limits import call_flow, pack
from .wire.message import MAX_MS, Message, due_after_ms, new_message, to_ms
from .options import (CALL_OPTIONS, TASK_OPTIONS, TaskOptions, check_priority, check_seconds,
                      check_text, is_number, new_task_id, positional_arity)
from .sending import Sender, check_queue_name
from .tracing import current_context

P = ParamSpec("P")
R = TypeVar("R")


class Task(Generic[P, R]):
    """A function registered with ``@app.task``; call it to run it in-process.

    Attributes:
        name: the name workers look it up by.
        queue: the queue its calls go to.
        priority: the priority of its calls, 0..9.
    """

    def __init__(self, sender: Sender, func: Callable[P, R], options: TaskOptions) -> None:
        self._sender = sender
        self.func = func
        self.options = options
        self.name = options.name
        self.queue = options.queue
        self.priority = options.priority
        self._signature = inspect.signature(func)
        self._arity = positional_arity(self._signature)
        self._flow = pack(self.name, options.limits)  # None: no limits, the usual case
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue!r} priority={self.priority}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function directly, in this process: nothing is enqueued.

        Args:
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            What the function returns.
        """
        return self.func(*args, **kwargs)

    # -- enqueueing --------------------------------------------------------------

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run as soon as a worker is free.

        Args:
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

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
        """Like ``delay()``, awaited: the write goes through ``redis.asyncio``.

        Args:
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A handle on the enqueued call.

        Raises:
            ArgumentError, EncodeError, MessageTooLarge, BrokerError: as ``delay()``.
        """
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 None, None)]))[0]

    def apply_in(self, seconds: float, /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``seconds`` from now.

        Args:
            seconds: the delay, a float; 0 or less means now. Positional only.
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A handle on the enqueued call; its status is ``scheduled`` until due.

        Raises:
            ConfigurationError: ``seconds`` is not a finite number, or ends after
                year 9999 (a ValueError).
            ArgumentError, EncodeError, MessageTooLarge, BrokerError: as ``delay()``.
        """
        eta_ms = self._delay_ms(seconds, "apply_in")
        return self._send([self._message(args, kwargs, self.queue, self.priority, eta_ms,
                                         None)])[0]

    async def aapply_in(self, seconds: float, /, *args: P.args,
                        **kwargs: P.kwargs) -> TaskHandle[R]:
        """Like ``apply_in()``, awaited.

        Args:
            seconds: the delay, a float; 0 or less means now. Positional only.
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A handle on the enqueued call.

        Raises:
            ConfigurationError, ArgumentError, EncodeError, MessageTooLarge,
                BrokerError: as ``apply_in()``.
        """
        eta_ms = self._delay_ms(seconds, "apply_in")
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 eta_ms, None)]))[0]

    def apply_at(self, when: Union[_dt.datetime, float], /, *args: P.args,
                 **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueue a call to run no earlier than ``when``.

        Args:
            when: an aware ``datetime`` or a Unix timestamp in seconds; a time in
                the past means now. Positional only.
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A handle on the enqueued call; its status is ``scheduled`` until due.

        Raises:
            ConfigurationError: ``when`` is a naive datetime, not a finite number, or
                after year 9999 (a ValueError).
            ArgumentError, EncodeError, MessageTooLarge, BrokerError: as ``delay()``.
        """
        return self._send([self._message(args, kwargs, self.queue, self.priority,
                                         self._eta_ms(when), None)])[0]

    async def aapply_at(self, when: Union[_dt.datetime, float], /, *args: P.args,
                        **kwargs: P.kwargs) -> TaskHandle[R]:
        """Like ``apply_at()``, awaited.

        Args:
            when: an aware ``datetime`` or a Unix timestamp in seconds.
                Positional only.
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A handle on the enqueued call.

        Raises:
            ConfigurationError, ArgumentError, EncodeError, MessageTooLarge,
                BrokerError: as ``apply_at()``.
        """
        return (await self._asend([self._message(args, kwargs, self.queue, self.priority,
                                                 self._eta_ms(when), None)]))[0]

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    *, queue: Optional[str] = None, priority: Optional[int] = None,
                    delay: Optional[float] = None,
                    eta: Union[_dt.datetime, float, None] = None,
                    task_id: Optional[str] = None, limit_key: Optional[str] = None,
                    debounce: Optional[float] = None,
                    expires: Union[_dt.datetime, float, None] = None,
                    durability: CallSetting = APP,
                    **unknown: Any) -> TaskHandle[R]:
        """Enqueue a call with per-call options that override the decorator's.

        Args:
            args: positional arguments of the function: a tuple or list (None: none).
            kwargs: keyword arguments of the function: a dict (None: none).
            queue: the queue to put it in.
            priority: 0..9, 9 runs first.
            delay: seconds from now before it may run.
            eta: an aware datetime or Unix timestamp before which it does not run.
            task_id: the id to use; an id already pending is not enqueued twice.
            limit_key: the task's rate_limit and max_running hold per key (a tenant).
            debounce: seconds; with ``task_id``, a call whose id is still scheduled
                is replaced (arguments, and due ``debounce`` seconds from now).
            expires: seconds from now, or an aware datetime: not started by then,
                it never runs (status ``cancelled``, ``get()`` raises TaskFailed
                with ``exc_type == "Expired"``).
            durability: None, "replicated" or "fsync" for this call (default: the
                app's): whether replicas must confirm the enqueue (see
                :doc:`/guide/durability`).

        Returns:
            A handle on the enqueued call (on the call already pending, when
            ``task_id`` names one).

        Raises:
            ConfigurationError: an unknown option, or a bad queue, priority, delay, eta,
                task_id or durability (a ValueError).
            DurabilityError: replicas did not confirm the enqueue within the app's
                durability_timeout; the task may or may not be in Redis.
            ArgumentError: ``args`` is not a tuple or list, or ``kwargs`` not a dict
                with str keys, or they do not fit the function (a TypeError).
            EncodeError, MessageTooLarge, BrokerError: as ``delay()``.
        """
        message = self._call_message(args, kwargs, queue, priority, delay, eta, task_id, unknown,
                                     {"limit_key": limit_key, "debounce": debounce,
                                      "expires": expires})
        return self._send([message], durability)[0]

    async def aapply_async(self, args: Sequence[Any] = (),
                           kwargs: Optional[Dict[str, Any]] = None, *,
                           queue: Optional[str] = None, priority: Optional[int] = None,
                           delay: Optional[float] = None,
                           eta: Union[_dt.datetime, float, None] = None,
                           task_id: Optional[str] = None, limit_key: Optional[str] = None,
                           debounce: Optional[float] = None,
                           expires: Union[_dt.datetime, float, None] = None,
                           durability: CallSetting = APP,
                           **unknown: Any) -> TaskHandle[R]:
        """Like ``apply_async()``, awaited; it takes the same options.

        Args:
            args: positional arguments of the function.
            kwargs: keyword arguments of the function.
            queue: see ``apply_async()``.
            priority: see ``apply_async()``.
            delay: see ``apply_async()``.
            eta: see ``apply_async()``.
            task_id: see ``apply_async()``.
            limit_key: see ``apply_async()``.
            debounce: see ``apply_async()``.
            expires: see ``apply_async()``.
            durability: see ``apply_async()``.

        Returns:
            A handle on the enqueued call.

        Raises:
            ConfigurationError, DurabilityError, ArgumentError, EncodeError,
                MessageTooLarge, BrokerError: as ``apply_async()``.
        """
        return (await self._asend([self._call_message(
            args, kwargs, queue, priority, delay, eta, task_id, unknown,
            {"limit_key": limit_key, "debounce": debounce, "expires": expires})],
            durability))[0]

    def _call_message(self, args: Any, kwargs: Any, queue: Optional[str],
                      priority: Optional[int], delay: Optional[float], eta: Any,
                      task_id: Optional[str], unknown: Dict[str, Any],
                      flow: Optional[Dict[str, Any]] = None) -> Message:
        """The message of an ``apply_async`` call, every option checked; ``flow``
        holds the flow control options (limits.py)."""
        where = f"task {self.name!r}"
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) "
                                     f"{', '.join(sorted(unknown))} for apply_async; valid "
                                     f"options are "
                                     f"{', '.join(sorted(CALL_OPTIONS | FLOW_OPTIONS))}")
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
        message = self._message(tuple(args), dict(kwargs), queue, priority, eta_ms, task_id)
        if flow and any(value is not None for value in flow.values()):
            spec, due_ms = call_flow(self.name, self.options.limits, flow, task_id=task_id,
                                     timed=eta is not None or delay is not None,
                                     now_ms=message.enqueued_at_ms, where=where)
            message = replace(message, flow=spec, eta_ms=due_ms or message.eta_ms)
        return message

    def delay_many(self, calls: Iterable[Sequence[Any]]) -> List[TaskHandle[R]]:
        """Enqueue many calls in as few round trips as possible.

        Args:
            calls: one tuple of positional arguments per call.

        Returns:
            One handle per call, in order.

        Raises:
            ArgumentError: ``calls`` is not iterable, or one call is not a tuple or
                list, or does not fit the function (a TypeError).
            EncodeError, MessageTooLarge, BrokerError: as ``delay()``; every call
                is checked before any is sent.
        """
        return self._send(self._many_messages(calls))

    async def adelay_many(self, calls: Iterable[Sequence[Any]]) -> List[TaskHandle[R]]:
        """Like ``delay_many()``, awaited.

        Args:
            calls: one tuple of positional arguments per call.

        Returns:
            One handle per call, in order.

        Raises:
            ArgumentError, EncodeError, MessageTooLarge, BrokerError: as
                ``delay_many()``.
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
        if not is_number(seconds) or not math.isfinite(seconds):
            raise ConfigurationError(f"task {self.name!r}: {what} takes a finite number of "
                                     f"seconds, got {reprlib.repr(seconds)}")
        if seconds <= 0:
            return None
        now_ms = self._sender.clock.now_ms()
        if seconds > (MAX_MS - now_ms) / 1000.0:
            raise ConfigurationError(f"task {self.name!r}: {what} of {seconds!r} seconds ends "
                                     f"after year 9999; give a nearer time")
        return due_after_ms(self._sender.clock, seconds)

    def _eta_ms(self, when: Any) -> int:
        """Unix ms of an aware datetime or a timestamp (0 for any time before 1970)."""
        if isinstance(when, _dt.datetime):
            if when.tzinfo is None or when.utcoffset() is None:
                raise ConfigurationError(f"task {self.name!r}: eta {when!r} is a naive "
                                         f"datetime; give it a time zone")
            seconds = when.timestamp()
        elif is_number(when) and math.isfinite(when):
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
        return new_message(task_id or new_task_id(), self.name, list(args), kwargs, queue,
                           priority, now_ms, eta_ms, self._flow, current_context())

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

        Args:
            *args: positional arguments of the function (after the result).
            **kwargs: keyword arguments of the function.

        Returns:
            A ``Signature`` for ``chain``, ``group`` and ``chord``.

        Raises:
            ConfigurationError: a broadcast task (it would run once, as a plain task).
        """
        self._refuse_broadcast_step()
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: it ignores the result of the step before it.

        Args:
            *args: positional arguments of the function.
            **kwargs: keyword arguments of the function.

        Returns:
            A ``Signature`` for ``chain``, ``group`` and ``chord``.

        Raises:
            ConfigurationError: a broadcast task (it would run once, as a plain task).
        """
        self._refuse_broadcast_step()
        return Signature(self, args, kwargs, immutable=True)

    def _refuse_broadcast_step(self) -> None:
        # a step is sent as a plain task: one subscriber's run, the others' never
        if self.options.broadcast:
            raise ConfigurationError(
                f"task {self.name!r} is a broadcast task: it cannot be a step of a chain, "
                f"group or chord (a step runs once, and the workflow waits for one result); "
                f"send it with delay() and wait with join()")

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

    def _send(self, messages: List[Message],
              durability: CallSetting = APP) -> List[TaskHandle[R]]:
        if self.options.broadcast:  # a BroadcastHandle per call (broadcast.py)
            handles = broadcast.send(self._sender, messages, to_ms(self.options.result_ttl),
                                     durability)
            return cast(List[TaskHandle[R]], handles)
        self._sender.send(messages, durability)
        return self._sender.handles(messages, to_ms(self.options.result_ttl))

    async def _asend(self, messages: List[Message],
                     durability: CallSetting = APP) -> List[TaskHandle[R]]:
        if self.options.broadcast:  # sent from a thread: it checks the batch here
            self._sender.refuse_in_batch(f"send broadcast task {self.name!r}")
            return await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(self._send, messages, durability))
        await self._sender.asend(messages, durability)
        return self._sender.handles(messages, to_ms(self.options.result_ttl))


class AsyncTask(Task[P, R]):
    """A task whose function is an ``async def``.

    ``delay(...).get()`` gives what its coroutine returns, and calling it returns
    the coroutine, as the function does.

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
