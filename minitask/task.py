"""Task: a registered function, its options, and the ways to enqueue it."""
from __future__ import annotations

import asyncio
import datetime as _dt
import functools
from typing import (TYPE_CHECKING, Any, Callable, Coroutine, Dict, Generic, Iterable, List,
                    Optional, Protocol, Sequence, Tuple, TypeVar, Union, cast,
                    overload)

from . import broadcast
from ._compat import ParamSpec
from .broker.durability import APP, CallSetting
from .call import CallOptions, Calls
from .canvas import Signature
from .errors import ConfigurationError
from .handle import TaskHandle
from .options import TaskOptions
from .sending import Sender
from .wire.message import Message, to_ms

if TYPE_CHECKING:
    from typing import Unpack  # 3.11; never imported at run time

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
        self._calls = Calls(sender, func, options)
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
        return self._send_one(self._calls.message(args, kwargs, self.queue, self.priority))

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
        return (await self._asend([self._calls.message(args, kwargs, self.queue,
                                                       self.priority)]))[0]

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
        eta_ms = self._calls.delay_ms(seconds, "apply_in")
        return self._send([self._calls.message(args, kwargs, self.queue, self.priority,
                                               eta_ms)])[0]

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
        eta_ms = self._calls.delay_ms(seconds, "apply_in")
        return (await self._asend([self._calls.message(args, kwargs, self.queue,
                                                       self.priority, eta_ms)]))[0]

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
        return self._send([self._calls.message(args, kwargs, self.queue, self.priority,
                                               self._calls.eta_ms(when))])[0]

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
        return (await self._asend([self._calls.message(args, kwargs, self.queue, self.priority,
                                                       self._calls.eta_ms(when))]))[0]

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    **options: Unpack[CallOptions]) -> TaskHandle[R]:
        """Enqueue a call with per-call options that override the decorator's.

        Args:
            args: positional arguments of the function: a tuple or list (None: none).
            kwargs: keyword arguments of the function: a dict (None: none).
            **options: any of ``queue`` (the queue to put it in); ``priority``
                (0..9, 9 runs first); ``delay`` (seconds from now before it may
                run); ``eta`` (an aware datetime or Unix timestamp before which it
                does not run); ``task_id`` (the id to use; an id already pending is
                not enqueued twice); ``limit_key`` (the task's rate_limit and
                max_running hold per key, a tenant); ``debounce`` (seconds; with
                ``task_id``, a call whose id is still scheduled is replaced:
                arguments, and due ``debounce`` seconds from now); ``expires``
                (seconds from now, or an aware datetime: not started by then, it
                never runs: status ``cancelled``, ``get()`` raises TaskFailed with
                ``exc_type == "Expired"``); ``group`` (a str or int: the call's
                group in a fair queue, see :doc:`/guide/fair-queues`); ``durability``
                (None, "replicated" or "fsync" for this call, default the app's:
                whether replicas must confirm the enqueue, see
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
        message, durability = self._calls.applied(args, kwargs, options)
        return self._send_one(message, durability, options.get("task_id") is None)

    async def aapply_async(self, args: Sequence[Any] = (),
                           kwargs: Optional[Dict[str, Any]] = None,
                           **options: Unpack[CallOptions]) -> TaskHandle[R]:
        """Like ``apply_async()``, awaited; it takes the same options, checked alike.

        Args:
            args: positional arguments of the function.
            kwargs: keyword arguments of the function.
            **options: as ``apply_async()``.

        Returns:
            A handle on the enqueued call.

        Raises:
            ConfigurationError, DurabilityError, ArgumentError, EncodeError,
                MessageTooLarge, BrokerError: as ``apply_async()``.
        """
        message, durability = self._calls.applied(args, kwargs, options)
        return (await self._asend([message], durability))[0]

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
            DurabilityError: replicas did not confirm some chunk (of 1,000 calls) in
                time; every chunk was sent all the same, and ``task_ids`` holds the
                ids of the calls written unconfirmed, in order.
        """
        return self._send(self._calls.many(calls))

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
        return await self._asend(self._calls.many(calls))

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
        self._calls.check(args, kwargs)

    def call_options(self, options: Dict[str, Any]) -> Dict[str, Any]:
        """Per-call options of a workflow step, checked: ``queue``, ``priority``,
        ``delay`` (seconds after the step is sent), ``eta``, ``task_id``, ``group``.

        Returns:
            ``queue``, ``priority``, ``delay_ms``, ``eta_ms`` (None: not given),
            ``task_id`` (None: a new one), ``group`` (None: the task's ``group_by``).

        Raises:
            ConfigurationError: an unknown option or a bad value (a ValueError).
        """
        return self._calls.step_options(options)

    def step_flow(self, args: Sequence[Any], kwargs: Dict[str, Any], group: Optional[str],
                  receives: bool) -> Tuple[Optional[str], bool]:
        """A workflow step's flow spec (limits and group), and whether its group is the
        result of the step before it (``Calls.step_flow``)."""
        return self._calls.step_flow(args, kwargs, group, receives)

    def _send_one(self, message: Message, durability: CallSetting = APP,
                  fresh: bool = True) -> TaskHandle[R]:
        """Send one call; ``fresh``: its id was made for it, so that it cannot be pending
        already, and a plain call (``Sender.send_plain``) goes the shortest way."""
        if fresh and durability is APP and not self.options.broadcast:
            handle = self._sender.send_plain(message, to_ms(self.options.result_ttl))
            if handle is not None:
                return handle
        return self._send([message], durability)[0]

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
