"""One call of a task: its arguments bound, its options checked, its message built.

Everything a call is checked against happens here, in the caller, before any
command is sent: the function's signature, the time options, the flow control
options. ``Task`` and its ``a*`` twins share this one path, so a sync call and
its awaited twin accept and refuse exactly the same things.
"""
from __future__ import annotations

import datetime as _dt
import inspect
from dataclasses import replace
from typing import (Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypedDict,
                    Union)

from .broker.durability import APP, CallSetting
from .errors import ArgumentError, ConfigurationError
from .limits import CALL_OPTIONS as FLOW_OPTIONS
from .limits import call_flow, group_name, pack
from .options import (CALL_OPTIONS, TASK_OPTIONS, TaskOptions, check_priority, check_seconds,
                      check_task_id, is_finite, new_task_id, positional_arity)
from .printable import short_repr
from .sending import Sender, check_queue_name
from .tracing import current_context
from .wire.message import MAX_MS, Message, due_after_ms, new_message, to_ms

#: Every option ``apply_async`` takes.
APPLY_OPTIONS = CALL_OPTIONS | FLOW_OPTIONS | {"durability"}
#: Every option a workflow step's signature takes (``Signature.set``).
STEP_OPTIONS = CALL_OPTIONS | {"group"}
#: Stands for the result a workflow step receives, where ``group_by`` looks for its group.
RESULT = object()


class CallOptions(TypedDict, total=False):
    """The options of one call (``apply_async``); each overrides the task's."""

    queue: Optional[str]
    priority: Optional[int]
    delay: Optional[float]
    eta: Union[_dt.datetime, float, None]
    task_id: Optional[str]
    limit_key: Optional[str]
    debounce: Optional[float]
    expires: Union[_dt.datetime, float, None]
    group: Union[str, int, None]
    durability: CallSetting


class Calls:
    """Builds the messages of one task's calls.

    ``func`` None: a task known only by its name (``app.send``), whose arguments
    no one here can bind; the worker that runs it checks them.
    """

    def __init__(self, sender: Sender, func: Optional[Callable[..., Any]],
                 options: TaskOptions) -> None:
        self._sender = sender
        self.options = options
        self.name = options.name
        self._where = f"task {options.name!r}"
        self._signature = None if func is None else inspect.signature(func)
        self._arity = None if self._signature is None else positional_arity(self._signature)
        self._flow = pack(self.name, options.limits)  # None: no limits, the usual case

    def message(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue: str, priority: int,
                eta_ms: Optional[int] = None, task_id: Optional[str] = None) -> Message:
        """The message of a call whose options are already checked."""
        arity = self._arity
        if kwargs or arity is None or not arity[0] <= len(args) <= arity[1]:
            self.check(args, kwargs)  # (what fits the arity binds: ``check`` says so)
        now_ms = self._sender.clock.now_ms()
        if eta_ms is not None and eta_ms <= now_ms:
            eta_ms = None
        flow = self._flow
        if self.options.grouping.group_by is not None:
            flow = pack(self.name, self.options.limits, group=self._group_of(args, kwargs),
                        grouping=self.options.grouping)
        return new_message(task_id or new_task_id(), self.name, list(args), kwargs, queue,
                           priority, now_ms, eta_ms, flow, current_context())

    def _group_of(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Optional[str]:
        """The group of a call of a ``group_by`` task: its argument's value, bound as
        the function would bind it (defaults applied), as ``group_name`` stores it;
        None when that value is ``RESULT`` (a workflow step's, see ``step_flow``)."""
        name = self.options.grouping.group_by
        # a group_by task has its function: only @app.task sets the option
        assert name is not None and self._signature is not None
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if name not in bound.arguments:
            raise ArgumentError(f"{self._where}: group_by={name!r} needs the argument "
                                f"{name!r}, and the call gives none", task_name=self.name)
        if bound.arguments[name] is RESULT:
            return None
        try:
            return group_name(bound.arguments[name], self._where, f"argument {name!r} (group_by)")
        except ConfigurationError as exc:
            raise ArgumentError(str(exc), task_name=self.name) from None

    def step_flow(self, args: Sequence[Any], kwargs: Dict[str, Any], group: Optional[str],
                  receives: bool) -> Tuple[Optional[str], bool]:
        """A workflow step's flow spec (``limits.pack``: its task's limits, and its group:
        ``group``, the signature's ``group`` option, else its ``group_by`` argument's
        value), and whether its group is the result of the step before it.

        ``receives``: the step gets that result as its first argument, before ``args``.
        When ``group_by`` names the parameter that result fills, the group is known only
        when the step is sent: the spec then ends with an empty group, which
        ``stores/workflows.py`` completes with the result (``group_name``'s rules).

        Raises:
            ArgumentError: a ``group_by`` argument that is no group (nothing is sent).
        """
        grouping = self.options.grouping
        from_result = False
        if group is None and grouping.group_by is not None:
            group = self._group_of((RESULT, *args) if receives else args, kwargs)
            if group is None:
                group, from_result = "", True
        return pack(self.name, self.options.limits, group=group, grouping=grouping), from_result

    def applied(self, args: Any, kwargs: Any, options: CallOptions,
                what: str = "apply_async") -> Tuple[Message, CallSetting]:
        """The message of an ``apply_async`` call (or ``what``, as ``send``) and its
        durability, every option checked."""
        where = self._where
        self._refuse_unknown(options, APPLY_OPTIONS, what)
        args, kwargs = self._arguments(args, kwargs, what)
        queue, priority = self._placed(options)
        eta, delay = options.get("eta"), options.get("delay")
        eta_ms: Optional[int] = None
        if eta is not None:
            eta_ms = self.eta_ms(eta)
        elif delay is not None:
            eta_ms = self.delay_ms(delay, "delay")
        task_id = options.get("task_id")
        if task_id is not None:
            check_task_id(task_id, where)
        message = self.message(tuple(args), dict(kwargs), queue, priority, eta_ms, task_id)
        flow = {name: options.get(name) for name in FLOW_OPTIONS}
        if flow["group"] is not None:
            if self.options.broadcast:
                raise ConfigurationError(f"{where}: a broadcast task takes no group (each "
                                         f"subscriber runs every call, in order)")
            flow["group"] = group_name(flow["group"], where, "group")
        elif self.options.grouping.group_by is not None:
            flow["group"] = self._group_of(args, kwargs)
        if any(value is not None for value in flow.values()):
            spec, due_ms = call_flow(self.name, self.options.limits, flow, task_id=task_id,
                                     timed=eta is not None or delay is not None,
                                     now_ms=message.enqueued_at_ms, where=where,
                                     grouping=self.options.grouping)
            message = replace(message, flow=spec, eta_ms=due_ms or message.eta_ms)
        return message, options.get("durability", APP)

    def _refuse_unknown(self, options: Any, valid: Any, what: str) -> None:
        """Raise ConfigurationError naming the options ``what`` does not take."""
        unknown = sorted(set(options) - valid)
        if unknown:
            raise ConfigurationError(f"{self._where}: unknown option(s) {', '.join(unknown)} "
                                     f"for {what}; valid options are "
                                     f"{', '.join(sorted(valid))}")

    def _placed(self, options: Any) -> Tuple[str, int]:
        """The queue and priority a call's ``options`` give it (None: the task's), checked."""
        queue = options.get("queue")
        queue = self.options.queue if queue is None else queue
        check_queue_name(queue)
        priority = options.get("priority")
        if priority is not None:
            priority = check_priority(priority, self._where)
        return queue, self.options.priority if priority is None else priority

    def _arguments(self, args: Any, kwargs: Any,
                   what: str) -> Tuple[Sequence[Any], Dict[str, Any]]:
        """``apply_async``'s (or ``what``'s) ``args`` and ``kwargs``, checked for their
        shape."""
        if args is None:
            args = ()
        elif not isinstance(args, (tuple, list)):
            raise ArgumentError(f"{self._where}: {what} args must be a tuple or list of "
                                f"positional arguments, got {short_repr(args)} "
                                f"({type(args).__name__}); for a single argument write "
                                f"args=(value,)", task_name=self.name)
        if kwargs is None:
            kwargs = {}
        elif not isinstance(kwargs, dict):
            raise ArgumentError(f"{self._where}: {what} kwargs must be a dict of keyword "
                                f"arguments, got {short_repr(kwargs)} "
                                f"({type(kwargs).__name__})", task_name=self.name)
        else:
            for key in kwargs:
                if not isinstance(key, str):
                    raise ArgumentError(f"{self._where}: {what} kwargs keys must be str "
                                        f"(argument names), got {short_repr(key)}",
                                        task_name=self.name)
        return args, kwargs

    def many(self, calls: Iterable[Sequence[Any]]) -> List[Message]:
        """The messages of a ``delay_many``: one tuple of positional arguments each."""
        where = self._where
        try:
            each = iter(calls)
        except TypeError:
            raise ArgumentError(f"{where}: delay_many takes an iterable of argument tuples, "
                                f"got {short_repr(calls)}", task_name=self.name) from None
        messages = []
        queue, priority = self.options.queue, self.options.priority
        for index, args in enumerate(each):
            if not isinstance(args, (tuple, list)):
                raise ArgumentError(
                    f"{where}: delay_many takes one tuple (or list) of positional arguments "
                    f"per call; call {index} is {short_repr(args)} ({type(args).__name__}); "
                    f"write (value,) for a single argument, and use apply_async(args, "
                    f"kwargs) for keyword arguments", task_name=self.name)
            try:
                messages.append(self.message(tuple(args), {}, queue, priority))
            except ArgumentError as exc:  # which call of many: its index and arguments
                why = str(exc).removeprefix(f"{where}: ")
                raise ArgumentError(f"{where}: delay_many call {index} "
                                    f"{short_repr(tuple(args))}: {why}",
                                    task_name=self.name) from None
        return messages

    def delay_ms(self, seconds: Any, what: str) -> Optional[int]:
        """The due time ``seconds`` from now in ms, or None (<= 0 means now)."""
        if not is_finite(seconds):
            raise ConfigurationError(f"{self._where}: {what} takes a finite number of "
                                     f"seconds, got {short_repr(seconds)}")
        if seconds <= 0:
            return None
        now_ms = self._sender.clock.now_ms()
        if seconds > (MAX_MS - now_ms) / 1000.0:
            raise ConfigurationError(f"{self._where}: {what} of {short_repr(seconds)} seconds ends "
                                     f"after year 9999; give a nearer time")
        return due_after_ms(self._sender.clock, seconds)

    def eta_ms(self, when: Any) -> int:
        """Unix ms of an aware datetime or a timestamp (0 for any time before 1970)."""
        if isinstance(when, _dt.datetime):
            if when.tzinfo is None or when.utcoffset() is None:
                raise ConfigurationError(f"{self._where}: eta {when!r} is a naive "
                                         f"datetime; give it a time zone")
            seconds = when.timestamp()
        elif is_finite(when):
            seconds = when  # (an int of any size compares: float() of a huge one raises)
        else:
            raise ConfigurationError(f"{self._where}: eta must be an aware datetime or "
                                     f"a finite Unix timestamp, got {short_repr(when)}")
        if seconds > MAX_MS / 1000.0:
            raise ConfigurationError(f"{self._where}: eta {short_repr(when)} is after the end of "
                                     f"year 9999; give a nearer time")
        return to_ms(seconds) if seconds > 0 else 0

    def check(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        """Raise ArgumentError unless the arguments bind to the function (a task
        known only by its name takes any)."""
        signature, arity = self._signature, self._arity
        if signature is None:
            return
        try:
            if kwargs or arity is None or not arity[0] <= len(args) <= arity[1]:
                signature.bind(*args, **kwargs)  # the full check, and its message
        except TypeError as exc:
            hint = self._misplaced_options(signature, kwargs)
            raise ArgumentError(f"{self._where}: {exc}{hint}", task_name=self.name) from None

    def step_options(self, options: Dict[str, Any]) -> Dict[str, Any]:
        """``Task.call_options``: a workflow step's per-call options, checked."""
        where = self._where
        self._refuse_unknown(options, STEP_OPTIONS, "a signature")
        queue, priority = self._placed(options)
        group = options.get("group")
        if group is not None:
            group = group_name(group, where, "group")
        delay = options.get("delay")
        delay_ms = None if delay is None else to_ms(check_seconds(delay, "delay", where))
        eta = options.get("eta")
        task_id = options.get("task_id")
        if task_id is not None:
            check_task_id(task_id, where)
        return {"queue": queue, "priority": priority, "delay_ms": delay_ms or None,
                "eta_ms": None if eta is None else self.eta_ms(eta), "task_id": task_id,
                "group": group}

    @staticmethod
    def _misplaced_options(signature: inspect.Signature, kwargs: Dict[str, Any]) -> str:
        """Say where an option given as a keyword argument of the function belongs."""
        parameters = signature.parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return ""
        unexpected = [key for key in kwargs if key not in parameters]
        per_call = [key for key in unexpected if key in CALL_OPTIONS]
        per_task = [key for key in unexpected if key in TASK_OPTIONS - CALL_OPTIONS]
        hints = []
        if per_call:
            given = ", ".join(f"{key}={short_repr(kwargs[key])}" for key in per_call)
            hints.append(f"{', '.join(per_call)} is an option of the call, not an argument "
                         f"of the function: use apply_async(args, kwargs, {given})")
        if per_task:
            given = ", ".join(f"{key}=..." for key in per_task)
            hints.append(f"{', '.join(per_task)} is an option of the task: set it with "
                         f"@app.task({given})")
        return "".join(f"; {hint}" for hint in hints)
