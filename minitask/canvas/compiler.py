"""The workflow compiler: a workflow turned into its plan and its handle.

``Workflow.apply_async`` (``canvas/workflows.py``) compiles a workflow once, at
``delay()``: every task id assigned, every call checked as ``delay()`` checks it,
every group given the longest result ttl of the workflow, into the plan
``stores/workflows.py`` sends and keeps; and the handle ``delay()`` returns.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ArgumentError, ConfigurationError
from ..groups import GroupHandle, Handle
from ..handle import StepHandle
from ..options import MAX_TASK_ID_BYTES, new_task_id
from ..ranout import BEFORE_READ
from ..stores.plans import task_nodes
from ..stores.workflows import Node
from ..wire.serializer import check_arguments
from .workflows import Signature, SignedTask, Workflow, chain, chord, group


class Compiler:
    """Turns a workflow into a plan (see stores/workflows.py) and its handle."""

    def __init__(self, first: SignedTask) -> None:
        self.sender = first.sender
        self.broker = self.sender.broker()
        self.max_ttl = 0
        #: (queue, id) of every step given its own ``task_id``.
        self.chosen_ids: List[Tuple[str, str]] = []
        #: The handle of each task, by id: ``senders`` tells each which tasks send it.
        self.handles: Dict[str, StepHandle] = {}

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
        handle = StepHandle(self.broker, node["q"], node["id"], ttl, self.sender.async_broker,
                            name=task.name, sent=prefix is not None)  # delay() sends it
        self.handles[node["id"]] = handle
        return node, handle

    def errback(self, sig: Signature) -> Node:
        node, _ = self.task(sig, [], None, {})
        return node

    def finish(self, node: Node) -> None:
        """Give every group the longest result ttl of the workflow: its state must
        last as long as any of its tasks' outcomes; and every step's marker (``"mt"``,
        where it is longer than the step's own): it must outlive the handle record
        (which lives that long) that leads to the step, else a step that ran, its
        marker gone, reads as one not sent (stores/unsent.py) and is cancelled."""
        kind = node["k"]
        if kind in ("g", "h"):
            node["ttl"] = self.max_ttl
        elif kind == "t" and node["ttl"] < self.max_ttl:
            node["mt"] = self.max_ttl
        parts = (node["steps"] if kind == "c" else node["members"] if kind == "g"
                 else node["header"] + [node["body"]] if kind == "h" else [])
        for part in parts:
            self.finish(part)

    def senders(self, node: Node, before: Tuple[Tuple[str, str], ...] = ()) -> None:
        """Tell each task's handle the tasks whose end sends it (``before``: those of
        the part before ``node``; the first ``BEFORE_READ``): a step whose marker says
        sent while one of them is pending has a marker minitask did not write."""
        kind = node["k"]
        if kind == "t":
            handle = self.handles.get(node["id"])
            if handle is not None:
                handle._before = before
        elif kind == "c":
            for index, step in enumerate(node["steps"]):
                self.senders(step, before if index == 0 else _lasts(node["steps"][index - 1]))
        else:
            for member in node["members"] if kind == "g" else node["header"]:
                self.senders(member, before)
            if kind == "h":
                self.senders(node["body"], tuple(
                    task for member in node["header"] for task in _lasts(member))[:BEFORE_READ])


def _lasts(node: Node) -> Tuple[Tuple[str, str], ...]:
    """(queue, id) of the tasks whose end ends ``node`` (the first ``BEFORE_READ``)."""
    kind = node["k"]
    if kind == "t":
        return ((node["q"], node["id"]),)
    if kind == "c":
        return _lasts(node["steps"][-1])
    if kind == "h":
        return _lasts(node["body"])
    return tuple(task for member in node["members"] for task in _lasts(member))[:BEFORE_READ]
