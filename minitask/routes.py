"""Routes, and sending a task known only by its name.

``Minitask(..., routes={pattern: options})`` sets the queue and priority of
tasks by name, in one place: decorated tasks take them when they register,
sends by name when they are made. A producer that shares no code with the
workers sends with ``app.send(name, ...)`` or ``app.signature(name, ...)``;
no signature is at hand to check its arguments, so the worker that runs the
call checks them (``worker/runner.py``), and dead-letters a call that does not
bind with ``ArgumentError``. ``Minitask`` inherits ``send``, ``asend`` and
``signature`` from ``SendByName``, doors into ``ByName``.
"""
from __future__ import annotations

import fnmatch
import re
from typing import (TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Pattern, Sequence, Set,
                    Tuple, Union)

from .call import CallOptions, Calls
from .canvas import Signature
from .errors import ConfigurationError
from .handle import TaskHandle
from .options import TaskOptions, check_priority, check_text
from .sending import Sender, check_queue_name
from .task import Task
from .wire.message import to_ms

if TYPE_CHECKING:
    from typing import Unpack  # 3.11; never imported at run time

#: The options a route may set.
ROUTE_OPTIONS = frozenset({"queue", "priority"})
#: Names whose routed options a by-name sender keeps at hand (then it starts over).
NAMES_KEPT = 1024


class Routes:
    """The app's routes: patterns in the order given, each with its options.

    A pattern is an exact task name or an ``fnmatch``-style glob (``*`` matches
    any run of characters, dots included; ``?`` one; ``[abc]`` one of them),
    matched case-sensitively against the whole name. The first pattern that
    matches gives its options; later ones are not consulted.
    """

    def __init__(self, table: Any, where: str) -> None:
        if table is None:
            table = {}
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"{where}: routes must be a mapping of task names or "
                                     f"glob patterns to options, such as "
                                     f"{{'billing.*': {{'queue': 'billing'}}}}; got {table!r}")
        self._table: List[Tuple[str, Pattern[str], Dict[str, Any]]] = []
        for pattern, options in table.items():
            check_text(pattern, "route pattern", where, "name a task or a glob such as 'a.*'")
            self._table.append((pattern, re.compile(fnmatch.translate(pattern)),
                                _checked(pattern, options, where)))

    def __bool__(self) -> bool:
        return bool(self._table)

    def match(self, name: str) -> Tuple[Optional[str], Mapping[str, Any]]:
        """The first route whose pattern matches ``name``: (pattern, options), or
        (None, {}) when none does."""
        for pattern, compiled, options in self._table:
            if pattern == name or compiled.match(name):
                return pattern, options
        return None, {}

    def items(self) -> List[Tuple[str, Dict[str, Any]]]:
        """Every route, in order: (pattern, options)."""
        return [(pattern, dict(options)) for pattern, _, options in self._table]

    def queues(self) -> Set[str]:
        """The queues routes send to."""
        return {options["queue"] for _, _, options in self._table if "queue" in options}


def _checked(pattern: str, options: Any, where: str) -> Dict[str, Any]:
    here = f"{where}: route {pattern!r}"
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{here}: its options must be a mapping such as "
                                 f"{{'queue': 'billing', 'priority': 7}}, got {options!r}")
    unknown = sorted(map(repr, set(options) - ROUTE_OPTIONS))
    if unknown:
        raise ConfigurationError(f"{here}: unknown option(s) {', '.join(unknown)}; a route "
                                 f"sets {' and '.join(sorted(ROUTE_OPTIONS))} (the other "
                                 f"options go on the task or the call)")
    checked = dict(options)
    if "queue" in checked:
        try:
            check_queue_name(checked["queue"])
        except ConfigurationError as exc:
            raise ConfigurationError(f"{here}: {exc}") from None
    if "priority" in checked:
        check_priority(checked["priority"], here)
    return checked


class NamedTask:
    """A task this app does not register, known by its name: its calls go where the
    routes say, and no one here can check their arguments."""

    def __init__(self, sender: Sender, options: TaskOptions) -> None:
        self.sender = sender
        self.options = options
        self.name = options.name
        self.queue = options.queue
        self.priority = options.priority
        self._calls = Calls(sender, None, options)

    def __repr__(self) -> str:
        return f"<NamedTask {self.name} queue={self.queue!r} priority={self.priority}>"

    def send(self, args: Any, kwargs: Any, options: CallOptions) -> TaskHandle[Any]:
        message, durability = self._calls.applied(args, kwargs, options, "send")
        self.sender.send([message], durability)
        return self.sender.handles([message], to_ms(self.options.result_ttl))[0]

    async def asend(self, args: Any, kwargs: Any, options: CallOptions) -> TaskHandle[Any]:
        message, durability = self._calls.applied(args, kwargs, options, "asend")
        await self.sender.asend([message], durability)
        return self.sender.handles([message], to_ms(self.options.result_ttl))[0]

    def check_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        """Nothing to check against: the worker checks the arguments."""

    def call_options(self, options: Dict[str, Any]) -> Dict[str, Any]:
        return self._calls.step_options(options)

    def step_flow(self, args: Sequence[Any], kwargs: Dict[str, Any], group: Optional[str],
                  receives: bool) -> Tuple[Optional[str], bool]:
        return self._calls.step_flow(args, kwargs, group, receives)


class ByName:
    """What ``app.send`` and ``app.signature`` do: a registered task's own calls, or
    a ``NamedTask`` routed by its name."""

    def __init__(self, app_name: str, sender: Sender, tasks: Mapping[str, Task[Any, Any]],
                 routes: Routes, default_queue: str, result_ttl: float) -> None:
        self._app = app_name
        self._sender = sender
        self._tasks = tasks
        self._routes = routes
        self._default_queue = default_queue
        self._result_ttl = result_ttl
        self._named: Dict[str, NamedTask] = {}

    def send(self, name: Any, args: Any, kwargs: Any, options: CallOptions) -> TaskHandle[Any]:
        task = self._task(name, "send")
        if isinstance(task, NamedTask):
            return task.send(args, kwargs, options)
        return task.apply_async(args, kwargs, **options)

    async def asend(self, name: Any, args: Any, kwargs: Any,
                    options: CallOptions) -> TaskHandle[Any]:
        task = self._task(name, "asend")
        if isinstance(task, NamedTask):
            return await task.asend(args, kwargs, options)
        return await task.aapply_async(args, kwargs, **options)

    def signature(self, name: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Signature:
        task = self._task(name, "signature")
        if isinstance(task, NamedTask):
            return Signature(task, args, kwargs)
        return task.s(*args, **kwargs)

    def _task(self, name: Any, what: str) -> Union[Task[Any, Any], NamedTask]:
        check_text(name, "task name", f"app {self._app!r}: {what}()",
                   "use the name the workers register the task under")
        registered = self._tasks.get(name)
        if registered is not None:
            return registered
        named = self._named.get(name)
        if named is None:
            pattern, routed = self._routes.match(name)
            options = TaskOptions(name=name,
                                  queue=routed.get("queue") or self._default_queue,
                                  priority=routed.get("priority", 5),
                                  result_ttl=self._result_ttl, route=pattern)
            if len(self._named) >= NAMES_KEPT:
                self._named.clear()
            named = self._named[name] = NamedTask(self._sender, options)
        return named


class SendByName:
    """Sending by name as methods of the app (a mixin of ``Minitask``): ``send``,
    ``asend``, ``signature``."""

    #: Set by the app.
    _by_name: ByName

    def send(self, name: str, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
             **options: Unpack[CallOptions]) -> TaskHandle[Any]:
        """Enqueue a call of the task named ``name``, registered here or not.

        A task this app registers is sent as its ``apply_async`` would send it.
        Any other name goes to the queue (and priority) that ``options`` give,
        else its route, else the app's default; its arguments are checked by
        the worker that runs it, which dead-letters a call that does not bind
        with ``ArgumentError`` (see :doc:`/guide/routing`).

        Args:
            name: the task's name, as its workers register it.
            args: positional arguments: a tuple or list (None: none).
            kwargs: keyword arguments: a dict (None: none).
            **options: those of ``Task.apply_async``, checked alike.

        Returns:
            A handle on the enqueued call; its result is typed ``Any``.

        Raises:
            ConfigurationError: ``name`` is not a non-empty str of printable
                characters, or an option is unknown or bad (a ValueError).
            ArgumentError, EncodeError, MessageTooLarge, DurabilityError,
                BrokerError: as ``Task.apply_async()``.
        """
        return self._by_name.send(name, args, kwargs, options)

    async def asend(self, name: str, args: Sequence[Any] = (),
                    kwargs: Optional[Dict[str, Any]] = None,
                    **options: Unpack[CallOptions]) -> TaskHandle[Any]:
        """Like ``send()``, awaited: the write goes through ``redis.asyncio``.

        Args:
            name: the task's name, as its workers register it.
            args: positional arguments: a tuple or list (None: none).
            kwargs: keyword arguments: a dict (None: none).
            **options: as ``send()``.

        Returns:
            A handle on the enqueued call; its result is typed ``Any``.

        Raises:
            ConfigurationError, ArgumentError, EncodeError, MessageTooLarge,
                DurabilityError, BrokerError: as ``send()``.
        """
        return await self._by_name.asend(name, args, kwargs, options)

    def signature(self, name: str, /, *args: Any, **kwargs: Any) -> Signature:
        """A signature of the task named ``name``, for chains, groups and chords.

        Args:
            name: the task's name, as its workers register it; positional only.
            *args: positional arguments of the task (after the result of the
                step before it, unless made immutable with ``set(immutable=True)``).
            **kwargs: keyword arguments of the task.

        Returns:
            A ``Signature``, routed as ``send()`` routes; ``task.s(...)`` for a
            task this app registers.

        Raises:
            ConfigurationError: ``name`` is not a non-empty str of printable
                characters (a ValueError).
        """
        return self._by_name.signature(name, args, kwargs)
