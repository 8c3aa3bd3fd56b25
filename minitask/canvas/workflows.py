"""Workflows: signatures, chain, group and chord, and the handles they return.

A workflow is built from signatures (``add.s(2, 3)``), compiled once at
``delay()`` into a plan (``compiler.py``: every task id assigned, every call
checked as ``delay()`` checks it) and handed to ``stores/workflows.py``, which
sends its first tasks. From then on the plan lives in Redis, in the messages of the
tasks that carry it on and in the state of the groups being awaited; the
workers carry it on as tasks end (``worker/workflows.py``). Nothing is kept in
a process's memory, nothing polls.
"""
from __future__ import annotations

import reprlib
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, TypeVar

from ..broker.durability import naming_workflow
from ..errors import ArgumentError, ConfigurationError
from ..groups import GroupHandle, describe
from ..handle import TaskHandle
from ..sending import Sender
from ..stores.plans import task_nodes
from ..stores.step_ids import ids_reserved

W = TypeVar("W", bound="Workflow")


class TaskOptionsView(Protocol):
    @property
    def result_ttl(self) -> float: ...

    @property
    def ignore_result(self) -> bool: ...


class SignedTask(Protocol):
    """What a signature needs of its task (``minitask.Task`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def options(self) -> TaskOptionsView: ...

    @property
    def sender(self) -> Sender: ...

    def check_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None: ...

    def call_options(self, options: Dict[str, Any]) -> Dict[str, Any]: ...

    def step_flow(self, args: Sequence[Any], kwargs: Dict[str, Any], group: Optional[str],
                  receives: bool) -> Tuple[Optional[str], bool]: ...


class Workflow(ABC):
    """What signatures, chains, groups and chords share: error callbacks, ``|``,
    ``delay()``."""

    def __init__(self) -> None:
        self.errbacks: List[Signature] = []

    def on_error(self: W, sig: "Signature") -> W:
        """Run ``sig`` once if any task of this workflow ends dead.

        ``sig`` gets the failed task's id as its first argument, unless it is
        immutable (made with ``si()``).

        Args:
            sig: the signature to send.

        Returns:
            This workflow, to chain calls.

        Raises:
            ArgumentError: ``sig`` is not a signature.
        """
        if not isinstance(sig, Signature):
            raise ArgumentError(f"on_error takes a signature (task.s(...)), got "
                                f"{reprlib.repr(sig)}", task_name="?")
        self.errbacks.append(sig)
        return self

    def __or__(self, other: "Workflow") -> "chain":
        if not isinstance(other, Workflow):
            return NotImplemented
        if isinstance(self, chain) and not self.errbacks:
            return chain(*self.steps, other)
        return chain(self, other)

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        """Send the workflow, with more arguments for its first task(s).

        Args:
            *args: prepended to the arguments of its first task(s).
            **kwargs: added to theirs.

        Returns:
            The handle of its last task (a ``TaskHandle``), or a ``GroupHandle`` when
            it ends with a group.

        Raises:
            ArgumentError: a signature's arguments do not fit its function (a TypeError).
            EncodeError: an argument is not a msgpack type (a TypeError).
            MessageTooLarge: a message is over ``max_message_bytes``.
            ConfigurationError: tasks of different apps, or an empty chain.
            BrokerError: Redis failed; the first tasks may be partly sent.
                Nothing is written unless every call passes its checks.
            DurabilityError: replicas did not confirm the workflow in time; it was
                written (do not send it again), ``task_id`` is its handle's id; so too
                a BrokerError with ``sent`` (reply lost), ``task_ids`` its steps'.
        """
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> Any:
        """Like ``delay()``, with the arguments as a tuple and a dict.

        Args:
            args: prepended to the arguments of the first task(s).
            kwargs: added to theirs.
            **options: refused: set options on the signatures with ``set()``.

        Returns:
            As ``delay()``.

        Raises:
            ConfigurationError: options were given (a ValueError).
            ArgumentError, EncodeError, BrokerError: as ``delay()``.
        """
        if options:
            raise ConfigurationError(f"{type(self).__name__}.apply_async takes no options "
                                     f"({', '.join(sorted(options))}); set them on the "
                                     f"signatures with sig.set(...)")
        if args is None:
            args = ()
        if not isinstance(args, (tuple, list)):
            raise ArgumentError(f"apply_async args must be a tuple or list, got "
                                f"{reprlib.repr(args)}", task_name="?")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ArgumentError(f"apply_async kwargs must be a dict, got "
                                f"{reprlib.repr(kwargs)}", task_name="?")
        from .compiler import Compiler  # (it reads these classes: imported where it runs)
        compiler = Compiler(self.first_task())
        node, handle = compiler.compile(self, [], tuple(args), dict(kwargs or {}))
        compiler.finish(node)
        compiler.senders(node)
        compiler.check_ids(self)
        sender = compiler.sender
        sender.refuse_in_batch("start a workflow")
        # what app.handle(id) / app.group_handle(id) rebuild the handle from elsewhere
        record = (handle.id, describe(handle), compiler.max_ttl)
        broker = sender.broker()
        # a step's explicit id is one workflow's (a lone task's is checked, sent at once)
        with ids_reserved(broker.step_ids, compiler.chosen_ids, self,
                          handle.id if node["k"] != "t" else "", compiler.max_ttl):
            with naming_workflow(type(self).__name__.lower(), handle.id,
                                 [step["id"] for step in task_nodes(node)]):
                broker.workflows.start(node, sender.max_message_bytes, sender.clock.now_ms(),
                                       record)
        return handle

    @abstractmethod
    def first_task(self) -> SignedTask:
        """The task that runs first: it names the app the workflow is sent with."""


class Signature(Workflow):
    """A task with (partial) arguments and options: one step of a workflow.

    Made with ``task.s(*args, **kwargs)``, or ``task.si(...)`` for an immutable one,
    which does not receive the result of the step before it.
    """

    def __init__(self, task: SignedTask, args: Sequence[Any] = (),
                 kwargs: Optional[Dict[str, Any]] = None, *, immutable: bool = False) -> None:
        super().__init__()
        self.task = task
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.immutable = immutable
        self.options: Dict[str, Any] = {}
        self._resolved: Dict[str, Any] = task.call_options({})

    def __repr__(self) -> str:
        shown = [reprlib.repr(arg) for arg in self.args]
        shown += [f"{key}={reprlib.repr(value)}" for key, value in self.kwargs.items()]
        return f"{self.task.name}.{'si' if self.immutable else 's'}({', '.join(shown)})"

    def set(self, **options: Any) -> "Signature":
        """Set call options for this step, in place.

        Args:
            **options: ``queue``, ``priority``, ``delay`` (seconds after the step
                before it ends), ``eta``, ``task_id``, ``group`` (the step's group in
                a fair queue, over its task's ``group_by``); and ``immutable`` (True:
                the step ignores the result of the step before it, as ``si()`` makes).

        Returns:
            This signature (changed in place, as Celery's ``set``).

        Raises:
            ConfigurationError: an unknown option or a bad value (a ValueError).
        """
        immutable = options.pop("immutable", self.immutable)
        if not isinstance(immutable, bool):
            raise ConfigurationError(f"task {self.task.name!r}: immutable must be True or "
                                     f"False, got {immutable!r}")
        merged = {**self.options, **options}
        self._resolved = self.task.call_options(merged)
        self.options = merged
        self.immutable = immutable
        return self

    def clone(self) -> "Signature":
        copy = Signature(self.task, self.args, self.kwargs, immutable=self.immutable)
        copy.set(**self.options)
        copy.errbacks = list(self.errbacks)
        return copy

    def apply_async(self, args: Sequence[Any] = (), kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> Any:
        """Send this step alone, with the options ``Task.apply_async`` takes.

        Args:
            args: prepended to the signature's own positional arguments.
            kwargs: added to its keyword arguments.
            **options: ``queue``, ``priority``, ``delay``, ``eta``, ``task_id``,
                for this send only.

        Returns:
            Its ``TaskHandle``.

        Raises:
            ConfigurationError, ArgumentError, EncodeError, MessageTooLarge,
                BrokerError: as ``Task.apply_async()``.
        """
        if options:
            return self.clone().set(**options).apply_async(args, kwargs)
        return super().apply_async(args, kwargs)

    def first_task(self) -> SignedTask:
        return self.task

    def delay(self, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """Send this step alone, with more arguments.

        Args:
            *args: go before the signature's own positional arguments.
            **kwargs: go beside its own keyword arguments.

        Returns:
            Its ``TaskHandle``.

        Raises:
            ArgumentError, EncodeError, MessageTooLarge, BrokerError: as
                ``Task.delay()``.
        """
        handle: TaskHandle[Any] = self.apply_async(args, kwargs)
        return handle


def _items(steps: Tuple[Any, ...], what: str) -> List[Workflow]:
    """Steps given one by one, or as one iterable (a generator, a list)."""
    if len(steps) == 1 and not isinstance(steps[0], Workflow):
        try:
            steps = tuple(steps[0])
        except TypeError:
            raise ArgumentError(f"{what}() takes signatures, or one iterable of them; got "
                                f"{reprlib.repr(steps[0])}", task_name="?") from None
    for index, step in enumerate(steps):
        if not isinstance(step, Workflow):
            raise ArgumentError(f"{what}() step {index} is {reprlib.repr(step)}, not a "
                                f"signature (task.s(...)) or a workflow", task_name="?")
    return list(steps)


class chain(Workflow):  # noqa: N801 - a lower-case class, as Celery names it
    """Steps that run one after the other, each given the one before's result.

    ``delay()`` returns the handle of the last step: ``get()`` returns its result,
    or raises ``TaskFailed`` naming the step that ended dead.
    """

    def __init__(self, *steps: Any) -> None:
        super().__init__()
        self.steps = _items(steps, "chain")
        if not self.steps:
            raise ConfigurationError("chain() needs at least one step")

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.steps))

    def first_task(self) -> SignedTask:
        return self.steps[0].first_task()


class group(Workflow):  # noqa: N801
    """Members that run at once; as a step, its list of results flows on."""

    def __init__(self, *members: Any) -> None:
        super().__init__()
        self.members = _items(members, "group")

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"

    def delay(self, *args: Any, **kwargs: Any) -> "GroupHandle":
        """Send every member, with more arguments for each.

        Args:
            *args: go before each member's own positional arguments.
            **kwargs: added to each member's keyword arguments.

        Returns:
            A ``GroupHandle``: the members' handles in order, their results, counts.

        Raises:
            ArgumentError, EncodeError, MessageTooLarge, ConfigurationError,
                BrokerError: as ``chain.delay()``.
        """
        handle: GroupHandle = self.apply_async(args, kwargs)
        return handle

    def first_task(self) -> SignedTask:
        for member in self.members:
            return member.first_task()
        raise ConfigurationError("an empty group has no task to tell its app by; send it "
                                 "inside a workflow that has one")


class chord(Workflow):  # noqa: N801
    """A group, then a body that runs once with the group's results.

    The body runs after every member of the header succeeded, with their
    results in header order; a member that ends dead fails the chord.
    """

    def __init__(self, header: Any, body: Workflow) -> None:
        super().__init__()
        self.header = header if isinstance(header, group) else group(header)
        if not isinstance(body, Workflow):
            raise ArgumentError(f"chord() body must be a signature or a workflow, got "
                                f"{reprlib.repr(body)}", task_name="?")
        self.body = body

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"

    def first_task(self) -> SignedTask:
        for member in self.header.members:
            return member.first_task()
        return self.body.first_task()
