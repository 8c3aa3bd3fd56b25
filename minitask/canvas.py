"""Workflows: signatures, chain, group and chord, and the handles they return.

A workflow is built from signatures (``add.s(2, 3)``), compiled once at
``delay()`` into a plan (every task id assigned, every call checked as
``delay()`` checks it) and handed to ``stores/workflows.py``, which sends its
first tasks. From then on the plan lives in Redis, in the messages of the
tasks that carry it on and in the state of the groups being awaited; the
workers carry it on as tasks end (``worker/workflows.py``). Nothing is kept in
a process's memory, nothing polls.
"""
from __future__ import annotations

import math
import reprlib
from collections import Counter
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, TypeVar

from .broker.durability import naming_workflow
from .errors import ArgumentError, ConfigurationError
from .groups import GroupHandle, Handle, describe
from .handle import StepHandle, TaskHandle
from .options import MAX_TASK_ID_BYTES, new_task_id
from .sending import Sender
from .stores.plans import task_nodes
from .stores.step_ids import ids_reserved
from .stores.workflows import Node
from .wire.serializer import check_arguments

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
        compiler = _Compiler(self.first_task())
        node, handle = compiler.compile(self, [], tuple(args), dict(kwargs or {}))
        compiler.finish(node)
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


class _Compiler:
    """Turns a workflow into a plan (see stores/workflows.py) and its handle."""

    def __init__(self, first: SignedTask) -> None:
        self.sender = first.sender
        self.broker = self.sender.broker()
        self.max_ttl = 0
        #: (queue, id) of every step given its own ``task_id``.
        self.chosen_ids: List[Tuple[str, str]] = []

    def check_ids(self, workflow: Workflow) -> None:
        """Refuse ids chosen twice in the workflow, or too long: that step would never
        be sent, and what waits for it, never run (``stores.step_ids`` refuses those
        taken in Redis as it reserves them).

        Raises:
            ConfigurationError: naming the ids; nothing was sent.
        """
        long = sorted({task_id for _, task_id in self.chosen_ids
                       if len(task_id.encode("utf-8", "surrogatepass")) > MAX_TASK_ID_BYTES})
        if long:  # its plan record could not be read back (stores/plans.py)
            raise ConfigurationError(f"workflow {workflow!r}: the task id(s) "
                                     f"{', '.join(repr(task_id[:40]) + '...' for task_id in long)}"
                                     f" are longer than a workflow step's may be (at most "
                                     f"{MAX_TASK_ID_BYTES} bytes): choose shorter ids")
        counts = Counter(task_id for _, task_id in self.chosen_ids)
        twice = sorted(task_id for task_id, count in counts.items() if count > 1)
        if twice:
            raise ConfigurationError(f"workflow {workflow!r}: the task id(s) "
                                     f"{', '.join(map(repr, twice))} are given to more than "
                                     f"one step; each step needs an id of its own")

    def compile(self, item: Workflow, errs: List[Node], prefix: Optional[Tuple[Any, ...]],
                kwargs: Dict[str, Any]) -> Tuple[Node, Handle]:
        """``prefix`` is None for a step that receives a result when it runs, else the
        arguments (maybe none) the caller gives its first tasks now, with ``kwargs``."""
        errs = errs + [self.errback(sig) for sig in item.errbacks]
        if isinstance(item, Signature):
            return self.task(item, errs, prefix, kwargs)
        if isinstance(item, chain):
            nodes = []
            handle: Handle
            for index, step in enumerate(item.steps):
                node, handle = self.compile(step, errs, prefix if index == 0 else None,
                                            kwargs if index == 0 else {})
                nodes.append(node)
            return {"k": "c", "steps": nodes}, handle
        if isinstance(item, group):
            return self.group(item, errs, prefix, kwargs)
        assert isinstance(item, chord)
        header, _ = self.compile(item.header, errs, prefix, kwargs)
        body, handle = self.compile(item.body, errs, None, {})
        # the chord's state sits beside its body (or its header, for an empty body)
        home = next((task["q"] for task in task_nodes(body)), header["q"])
        return {"k": "h", "id": header["id"], "q": home, "ttl": 0,
                "header": header["members"], "body": body}, handle

    def group(self, item: group, errs: List[Node], prefix: Optional[Tuple[Any, ...]],
              kwargs: Dict[str, Any]) -> Tuple[Node, Handle]:
        members, handles, entries, finals = [], [], [], []
        for member in item.members:
            node, handle = self.compile(member, errs, prefix, kwargs)
            members.append(node)
            handles.append(handle)
            tasks = task_nodes(node)
            entries.append((tasks[0]["q"], tasks[0]["id"]) if tasks else None)
            finals.append(None if isinstance(handle, GroupHandle) else
                          (tasks[-1]["q"], tasks[-1]["id"]))
        group_id = new_task_id()
        home = next((task["q"] for member in members for task in task_nodes(member)), None)
        return ({"k": "g", "id": group_id, "q": home, "ttl": 0, "members": members},
                GroupHandle(group_id, handles, entries, finals, self.sender))

    def task(self, sig: Signature, errs: List[Node], prefix: Optional[Tuple[Any, ...]],
             kwargs: Dict[str, Any]) -> Tuple[Node, Handle]:
        task = sig.task
        if task.sender is not self.sender:
            raise ConfigurationError(f"task {task.name!r} belongs to another app than the "
                                     f"workflow's first task: a workflow runs in one app")
        args = sig.args
        keywords = sig.kwargs
        if prefix is None:
            checked = args if sig.immutable else (None, *args)  # None stands for the result
        else:
            if not sig.immutable:
                args = prefix + args
                keywords = {**keywords, **kwargs}
            checked = args
        try:
            task.check_call(checked, keywords)
        except ArgumentError as exc:
            if prefix is not None or sig.immutable:
                raise
            raise ArgumentError(f"workflow step {sig!r}: {exc}; a step after another gets "
                                f"that step's result as its first argument, before its own "
                                f"({task.name}.si(...) makes a step that takes none)",
                                task_name=task.name) from None
        options = sig._resolved
        # its limits and group (fair queues); a group_by argument that receives the
        # step before's result is known only when the step is sent (stores/workflows.py)
        flow, from_result = task.step_flow(args, keywords, options["group"],
                                           prefix is None and not sig.immutable)
        args, keywords = task.sender.types.arguments_to_wire(task.name, args, keywords)
        check_arguments(task.name, args, keywords)
        ttl = max(1, math.ceil(task.options.result_ttl * 1000))
        self.max_ttl = max(self.max_ttl, ttl)
        if options["task_id"]:
            self.chosen_ids.append((options["queue"], options["task_id"]))
        node = {"k": "t", "id": options["task_id"] or new_task_id(), "task": task.name,
                "args": list(args), "kwargs": keywords, "q": options["queue"],
                "p": options["priority"], "delay": options["delay_ms"],
                "eta": options["eta_ms"], "imm": sig.immutable, "ttl": ttl, "err": errs}
        if task.options.ignore_result:  # keeps no result: one that ran leaves nothing
            node["ir"] = True
        if flow is not None:  # absent from a step with neither: its plan is as it was
            node["fl"] = flow
            if from_result:
                node["fr"] = True
        return node, StepHandle(self.broker, node["q"], node["id"], ttl,
                                self.sender.async_broker)

    def errback(self, sig: Signature) -> Node:
        node, _ = self.task(sig, [], None, {})
        return node

    def finish(self, node: Node) -> None:
        """Give every group the longest result ttl of the workflow: its state must
        last as long as any of its tasks' outcomes."""
        kind = node["k"]
        if kind in ("g", "h"):
            node["ttl"] = self.max_ttl
        parts = (node["steps"] if kind == "c" else node["members"] if kind == "g"
                 else node["header"] + [node["body"]] if kind == "h" else [])
        for part in parts:
            self.finish(part)
