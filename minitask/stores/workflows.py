"""WorkflowStore: chains, groups and chords, carried on by the steps that end.

A workflow is a plan: a tree of task nodes (ids assigned up front), chains,
groups and chords, built and checked by ``minitask.canvas``. Nothing watches it.
Each task's message carries its *frame*: what follows it (a continuation) and
the error callbacks of the workflows around it. The worker that ends the task
carries the workflow on, before it records the task's own outcome:

* ``then``: send the next node, the task's result prepended to its arguments;
* ``join``: record the result as member ``i`` of a group (a chord's header, or a
  group followed by more steps); the member that completes the group sends what
  follows the group (kept in the group's state) with the results in order.

Every step of that is idempotent, so the order below makes any crash safe: if
the worker dies between two steps, the task is delivered again (its lease
expires), runs again, and redoes every step; what was done already is a no-op.

* A step is sent by ``spawn.lua`` only if its *marker* (``once:<id>``, in its
  queue's slot, as long as its workflow's results) does not exist yet, so a task that
  runs twice never sends its successor twice, even after that one finished (one
  found nowhere, its marker not minitask's, ends cancelled: ``_end_lost``; one
  cancelled before it was sent is not sent: ``unsent.py``). A step with a flow
  spec (its task's limits, its group in a fair queue) is sent by ``spawn_flow.lua``,
  which adds the spec and joins the group in that step.
* A group's member counts once (``HSETNX`` on its index, not ``INCR``); a group
  answers "complete" to every join until its continuation is marked fired, so
  a completing member that died before sending it sends it on redelivery, and
  the continuation's own markers keep it from being sent twice.
* A task that ends dead (``fail``) sends its error callbacks, records the
  failure in its group first (so the group can never fire), then cancels what
  would have followed, downstream-most first (``cancel_steps.lua`` sets the
  markers and records ``cancelled`` outcomes), so at any crash point the
  cancelled steps are closed under "follows": nothing can wait for ever.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import Transport, text
from ..errors import BrokerError, ConfigurationError, DecodeError, EncodeError, MessageTooLarge
from ..limits import group_name
from ..printable import own_logger, printable
from ..wire.message import Message, Outcome
from ..wire.serializer import (check_arguments, encode_message, encode_outcome, pack_data,
                               unpack_data)
from .plans import pack_plan, task_nodes, workflow_id_of
from .foreign import foreign
from .queue import QueueStore
from .unsent import stop_cancelled
from .workflow_checks import Step, lost_steps, send_steps, spawn_call, step_traces
from .workflow_links import (JOIN_DEPTH, Path, after_of, check_nesting, end_of, follow_of,
                             join_args, joined, marker_ttl, member_join, open_ttl)
from .workflow_reads import FRAME_VERSION, Failure, WorkflowReads

logger = own_logger(__name__)

#: A node of a plan, as msgpack carries it (see ``minitask.canvas`` for its fields):
#: ``{"k": "t"}`` a task, ``"c"`` a chain, ``"g"`` a group, ``"h"`` a chord.
Node = Dict[str, Any]
#: What follows a node: ``{"k": "then", "node", "next"}``, ``{"k": "join", "q", "id",
#: "i", "n", "ttl", "a"}`` (``workflow_links.member_join``), or None. A join's ``"a"``
#: names what follows the group, so that a member can end it when the group's state
#: cannot be read, ``"n"`` the group's size; frames of an older minitask may have neither.
Continuation = Optional[Dict[str, Any]]

#: Steps per spawn script call: keeps each script short so Redis stays responsive.
SPAWN_CHUNK = 1000


@dataclass
class _Writes:
    """What sending a node writes, gathered (and every message checked) first."""

    groups: List[Tuple[str, str, int, bytes, int]] = field(default_factory=list)
    #: By queue: (id, body, priority, due ms, ttl, flow spec or None) of each step.
    steps: Dict[str, List[Step]] = field(default_factory=dict)
    #: Groups with no member: what follows them runs at once, with [].
    empty: List[Continuation] = field(default_factory=list)
    #: A handle record to write with the first step: (id, packed record, ttl in ms).
    record: Optional[Tuple[str, bytes, int]] = None
    #: The workflow's plan record (plans.py), written with the handle record.
    plan: bytes = b""
    #: The id of the workflow the steps belong to (its frames and markers name it).
    wid: str = ""
    #: By step id: its node and what follows it (to cancel, were the step found nowhere).
    follows: Dict[str, Tuple[Node, Continuation]] = field(default_factory=dict)


def _carry(carried: Optional[_Writes], wid: str) -> _Writes:
    """Fresh writes for what follows an empty group, taking over the handle and plan
    records ``carried`` did not write (a chord with an empty header has no step before
    its body): they are written with the body's first step."""
    writes = _Writes(wid=wid)
    if carried is not None and carried.record is not None:
        writes.record, writes.plan, carried.record = carried.record, carried.plan, None
    return writes


def _step_flow(node: Node, value: Any) -> Optional[str]:
    """A step's flow spec (``limits.pack``: its limits and group), or None; a group
    taken from the result the step receives (``"fr"``: its ``group_by`` argument) is
    that result, as ``group_name`` stores a group.

    Raises:
        EncodeError: that result is no group (not a str or an int, say): the step
            before it is dead-lettered, saying so.
    """
    spec: Optional[str] = node.get("fl")
    if spec is None or not node.get("fr"):
        return spec
    where = f"task {node['task']!r}"
    try:
        return spec + group_name(value, f"{where}: workflow step {node['id']}",
                                 "its group_by argument, the result of the step before it,")
    except ConfigurationError as exc:
        raise EncodeError(str(exc), task_name=node["task"], path="group") from None


class WorkflowStore(WorkflowReads):
    """Sends workflow nodes and carries workflows on when their tasks end."""

    scripts = ("spawn", "spawn_flow", "cancel_steps", "group_create", "group_join",
               "hash_fields", "spawn_check", "spawn_group", "lost_steps")

    def __init__(self, transport: Transport, app_name: str, queues: QueueStore) -> None:
        super().__init__(transport, app_name)
        self._queues = queues

    # -- the producer -------------------------------------------------------------

    def start(self, node: Node, max_bytes: int, now_ms: int,
              record: Optional[Tuple[str, Any, int]] = None) -> None:
        """Send a workflow's first tasks (and create the state of its groups).

        Every message is built and checked before anything is written. ``record``
        (id, data, ttl in ms) is what ``app.handle`` or ``app.group_handle`` rebuilds
        the workflow's handle from in another process: it is written under
        ``handle:<id>`` in the same script call as the first task's message, with
        the workflow's plan record (``workflow:<id>``, plans.py) unless ``node`` is
        a lone task; every step then carries that id, the workflow's.

        Raises:
            EncodeError, MessageTooLarge: a message cannot be sent, or groups and
                chords nest more than ``JOIN_DEPTH`` deep; nothing was written.
            BrokerError: Redis failed, or refused a foreign key (see workflow_checks).
        """
        check_nesting(node, record[0] if record else "")
        writes = _Writes()
        if record is not None:
            writes.record = (record[0], pack_data(record[1], f"the handle of {record[0]}"),
                             record[2])
            if node["k"] != "t":
                writes.wid = record[0]
                writes.plan = pack_data(pack_plan(record[0], node, now_ms),
                                        f"the plan of workflow {record[0]}")
        self._plan(node, None, False, None, writes, now_ms, max_bytes)
        self._write(writes, now_ms, max_bytes, ())

    # -- a task ended -----------------------------------------------------------------

    def advance(self, frame: Dict[str, Any], value: Any, now_ms: int) -> None:
        """A task with ``frame`` succeeded with ``value``: send what follows it.

        Raises:
            EncodeError, MessageTooLarge: what follows cannot carry this value (the
                caller dead-letters the task instead); nothing was written.
            BrokerError: Redis failed; the whole step is safe to run again.
        """
        self._resume(frame.get("next"), value, now_ms, frame["max"], (), workflow_id_of(frame))

    def fail(self, frame: Dict[str, Any], failure: Failure, now_ms: int) -> None:
        """A task with ``frame`` ended dead: run its error callbacks once, fail its
        group, and cancel every step that would have followed it.

        Raises:
            BrokerError: Redis failed; the whole step is safe to run again.
        """
        max_bytes = frame["max"]
        errbacks = _Writes(wid=workflow_id_of(frame))
        for errback in frame.get("err") or ():
            try:
                self._plan(errback, failure.task_id, True, None, errbacks, now_ms, max_bytes)
            except (TypeError, ValueError) as exc:  # EncodeError, MessageTooLarge
                logger.error("workflow error callback %s (%s) cannot be sent: %s",
                             errback["id"], errback["task"], exc)
        self._write(errbacks, now_ms, max_bytes, ())
        self._fail_from(frame.get("next"), failure, now_ms, max_bytes, errbacks.wid, ())

    def stopped(self, frame: Dict[str, Any], failure: Failure, now_ms: int) -> None:
        """A task with ``frame`` was cancelled: cancel every step that would have
        followed it and fail its group (its error callbacks do not run: a cancel is
        no error).

        Raises:
            BrokerError: Redis failed; the whole step is safe to run again.
        """
        self._fail_from(frame.get("next"), failure, now_ms, frame["max"],
                        workflow_id_of(frame), ())

    def _stop_what_follows(self, join: Dict[str, Any], packed: Any, why: str, now_ms: int,
                           max_bytes: int, wid: str, path: Path) -> None:
        """A group whose state is not minitask's cannot complete: cancel what follows it
        (a chord's body), saying so, as the group's state or else the member's frame
        names it; a frame of an older minitask names none: then it is logged. ``path``:
        the groups this walk joined, ``join``'s last."""
        try:  # read as a complete group's is, a link back into ``path`` refused too
            follow = follow_of(join, packed, path) if packed else None
        except DecodeError:
            follow = None
        after = join.get("a")  # absent from a frame an older minitask wrote
        if follow is None and isinstance(after, dict):  # the member's frame names it
            follow = after.get("j")
            for queue, task_id, ttl in reversed(after.get("t") or ()):
                follow = {"k": "then", "next": follow,
                          "node": {"k": "t", "q": queue, "id": task_id, "ttl": ttl}}
        end = end_of(follow)  # the frame's, leading back into this walk: not followed
        if end is not None and ((end.get("q"), end.get("id")) in path
                                or len(path) >= JOIN_DEPTH):
            follow = None
        if follow is None:
            logger.error("%s; what follows it cannot be read either, and will not run",
                         printable(why))
            return
        self._fail_from(follow, Failure(join["id"], "group", "DecodeError", why, ""), now_ms,
                        max_bytes, wid, path)

    # -- carrying on ------------------------------------------------------------------

    def _resume(self, follow: Continuation, value: Any, now_ms: int, max_bytes: int,
                path: Path, wid: str = "", carried: Optional[_Writes] = None) -> None:
        """Send what follows a step; ``wid``: the id of its workflow ('' unknown);
        ``path``: the groups this walk joined (``workflow_links``).
        ``carried``: the writes of an empty group's workflow whose handle and plan
        records are not written yet (no step came before), written with this."""
        if follow is None:
            return
        if follow["k"] == "then":
            writes = _carry(carried, wid)
            self._plan(follow["node"], value, True, follow["next"], writes, now_ms, max_bytes)
            self._write(writes, now_ms, max_bytes, path)
            return
        inner = joined(follow, path)
        reply = self._join(follow, "ok", pack_data(value, f"the result of group member "
                                                          f"{follow['i']}"), max_bytes)
        self._act_on(follow, reply, now_ms, max_bytes, inner, wid)

    def _act_on(self, join: Dict[str, Any], reply: List[Any], now_ms: int,
                max_bytes: int, path: Path, wid: str = "") -> None:
        """Do what a group's answer to a join asks (see group_join.lua); ``path``: the
        groups this walk joined, ``join``'s last: what follows may not lead back."""
        status = text(reply[0])
        if status in ("complete", "failing"):
            try:  # the group's state holds them: data anyone could have written
                follow = follow_of(join, reply[1], path)
                failure = Failure.unpacked(reply[2]) if status == "failing" else None
            except DecodeError as exc:
                why = f"workflow group {join['id']}: {exc}; the group cannot complete"
                self._stop_what_follows(join, b"", why, now_ms, max_bytes, wid, path)
                raise DecodeError(f"{why} (inspect key {self.keys(join['q']).group(join['id'])}"
                                  f", then delete it)") from exc
        if status == "complete":
            try:
                values = [unpack_data(raw, f"a result of group {join['id']}")
                          for raw in reply[2:]]
            except DecodeError as exc:
                # a result no minitask wrote: what follows fails, naming it, instead of
                # waiting for ever for a group that can never complete
                why = f"workflow group {join['id']}: {exc}; the group cannot complete"
                self._fail_from(follow, Failure(join["id"], "group", "DecodeError", why, ""),
                                now_ms, max_bytes, wid, path)
                self._fired(join)
                raise DecodeError(f"{why} (inspect the key, then delete it)") from exc
            try:
                self._resume(follow, values, now_ms, max_bytes, path, wid)
            except (EncodeError, MessageTooLarge, BrokerError) as exc:
                # the results cannot travel on (a body message over the limit, a key of
                # another type where it goes: refused, nothing sent): what follows
                # fails, as if a step had ended dead, instead of never running
                if isinstance(exc, BrokerError) and not foreign(exc):
                    raise  # an outage: the whole step runs again
                logger.error("workflow group %s: what follows it cannot be sent: %s",
                             join["id"], exc)
                self._fail_from(follow, Failure(join["id"], "group", type(exc).__name__,
                                                str(exc), ""), now_ms, max_bytes, wid, path)
            except DecodeError as exc:
                self._stop_further(join, exc, now_ms, max_bytes, wid, path)
            self._fired(join)
        elif status == "failing":
            assert failure is not None
            try:
                self._fail_from(follow, failure, now_ms, max_bytes, wid, path)
            except DecodeError as exc:
                self._stop_further(join, exc, now_ms, max_bytes, wid, path)
        elif status == "corrupt":
            why = f"workflow group {join['id']}: {text(reply[1])}; the group cannot complete"
            self._stop_what_follows(join, reply[2] if len(reply) > 2 else b"", why, now_ms,
                                    max_bytes, wid, path)
            raise DecodeError(f"{why} (inspect the key, then delete it)")
        elif status == "gone":
            why = (f"workflow group {join['id']}: key {self.keys(join['q']).group(join['id'])} "
                   f"is gone (deleted, or expired after its result_ttl); the group cannot "
                   f"complete")
            logger.warning("%s: what follows it ends as cancelled", why)
            self._stop_what_follows(join, b"", why, now_ms, max_bytes, wid, path)

    def _stop_further(self, join: Dict[str, Any], exc: DecodeError, now_ms: int,
                      max_bytes: int, wid: str, path: Path) -> NoReturn:
        """Corrupt state further out (a group this one's state leads to) stopped the walk:
        the group the walk began with cancels what follows it, as the member's frame
        names it (a chord's body), which no group further out can; then ``exc`` is
        raised on. A walk over planted groups logs it once, not once a group."""
        if len(path) == 1:
            self._stop_what_follows(join, b"", f"workflow group {join['id']}: {exc}", now_ms,
                                    max_bytes, wid, path)
        raise exc

    def _fail_from(self, follow: Continuation, failure: Failure, now_ms: int,
                   max_bytes: int, wid: str, path: Path) -> None:
        """Cancel what follows a failed step: first the group it ends in (so that group
        can never fire) and what follows that group, then its own later steps; ``wid``:
        the id of their workflow ('' unknown), which their markers name; ``path``: the
        groups this walk joined (DecodeError if the group it ends in is one)."""
        later: List[Node] = []
        while follow is not None and follow["k"] == "then":
            later.append(follow["node"])
            follow = follow["next"]
        if follow is not None:
            inner = joined(follow, path)
            reply = self._join(follow, "dead", failure.packed(), max_bytes)
            self._act_on(follow, reply, now_ms, max_bytes, inner, wid)
        self._cancel(later, failure, now_ms, wid)

    def _cancel(self, nodes: Sequence[Node], failure: Failure, now_ms: int, wid: str) -> None:
        """Cancel every task of ``nodes``, downstream-most first, a call per run of
        tasks in one queue: a crash midway leaves only later steps cancelled."""
        tasks = [task for node in nodes for task in task_nodes(node)]
        if not tasks:
            return
        calls: List[ScriptCall] = []
        run: List[Node] = []
        for task in reversed(tasks):
            if run and run[-1]["q"] != task["q"]:
                calls.append(self._cancel_call(run, failure, now_ms, wid))
                run = []
            run.append(task)
        calls.append(self._cancel_call(run, failure, now_ms, wid))
        self.transport.run_calls(calls, f"cancel {len(tasks)} step(s) after "
                                        f"{failure.task_id} ended dead")

    def _cancel_call(self, tasks: Sequence[Node], failure: Failure, now_ms: int,
                     wid: str) -> ScriptCall:
        queue = tasks[0]["q"]
        k = self.keys(queue)
        ended = "was cancelled" if failure.exc_type == "Cancelled" else "ended dead"
        outcome = encode_outcome(Outcome(
            "cancelled", now_ms, exc_type=failure.exc_type,
            message=f"not run: step {failure.task_id} ({failure.task}) of its workflow "
                    f"{ended}: {failure.message}",
            traceback=failure.traceback, reason=f"an earlier workflow step {ended}",
            extra={"failed_task_id": failure.task_id, "failed_task": failure.task}))
        tail: List[Any] = []
        for task in tasks:
            tail += (k.once(task["id"]), k.result(task["id"]))
        tail += (outcome, wid)
        tail += [task["ttl"] for task in tasks]
        return ("cancel_steps", queue, (), tail, 2 * len(tasks))

    def _end_lost(self, writes: _Writes, skipped: List[str], now_ms: int, max_bytes: int,
                  path: Path) -> None:
        """What follows steps ``skipped`` (their marker was there) cancelled before they were
        sent, or that never ran (``lost_steps``: not minitask's marker, or purged: they end
        cancelled, naming it), ends cancelled rather than wait; one that ran is left."""
        stop = partial(self._fail_from, now_ms=now_ms, max_bytes=max_bytes, wid=writes.wid,
                       path=path)
        stop_cancelled(self.transport, self.keys, writes.steps, skipped, writes.follows, stop)
        lost = lost_steps(self.transport, self.keys, writes.steps,
                          step_traces(skipped, writes.follows),
                          lambda task_id: bool(writes.follows[task_id][0].get("ir")), now_ms,
                          SPAWN_CHUNK)
        for task_id, why in lost.items():
            node, follow = writes.follows[task_id]
            logger.error("workflow step %s (%s): %s; it and what follows it end cancelled",
                         printable(task_id), printable(node["task"]), printable(why))
            stop(follow, Failure(task_id, node["task"], "Cancelled", why, ""))

    # -- groups ------------------------------------------------------------------------

    def _join(self, join: Dict[str, Any], how: str, payload: bytes,
              most_sent: int = 0) -> List[Any]:
        """Record a member's end in its group; ``most_sent``: the sender's
        max_message_bytes (the frame's), which may exceed this app's."""
        k = self.keys(join["q"])
        reply = self.transport.run(
            "group_join", (k.group(join["id"]), k.group_results(join["id"])),
            join_args(join, how, payload, max(self.bounds.message, self.bounds.outcome,
                                              most_sent)),
            f"record member {join['i']} of workflow group {join['id']}")
        return list(reply)

    def _fired(self, join: Dict[str, Any]) -> None:
        """What follows the group was sent: later joins need do nothing, its results go
        (each is under its own task id), its state lives its result_ttl (set first)."""
        k = self.keys(join["q"])
        with self.transport.errors(f"mark workflow group {join['id']} done"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.pexpire(k.group(join["id"]), join["ttl"])
            pipe.hset(k.group(join["id"]), "fired", 1)
            pipe.delete(k.group_results(join["id"]))
            pipe.execute()

    # -- planning: a node -> the messages and group states it writes -------------------

    def _plan(self, node: Node, value: Any, has_value: bool, follow: Continuation,
              writes: _Writes, now_ms: int, max_bytes: int) -> None:
        kind = node["k"]
        if kind == "t":
            self._plan_task(node, value, has_value, follow, writes, now_ms, max_bytes)
        elif kind == "c":
            steps = node["steps"]
            rest = steps[1] if len(steps) == 2 else {"k": "c", "steps": steps[1:]}
            after = follow if len(steps) == 1 else {"k": "then", "node": rest, "next": follow}
            self._plan(steps[0], value, has_value, after, writes, now_ms, max_bytes)
        elif kind == "h":
            header = {"k": "g", "id": node["id"], "q": node["q"], "ttl": node["ttl"],
                      "members": node["header"]}
            self._plan(header, value, has_value, {"k": "then", "node": node["body"],
                                                  "next": follow},
                       writes, now_ms, max_bytes)
        elif follow is None:  # a group nobody waits for as a whole
            for member in node["members"]:
                self._plan(member, value, has_value, None, writes, now_ms, max_bytes)
        elif not node["members"]:
            writes.empty.append(follow)
        else:
            after = after_of(follow)
            writes.groups.append((node["q"], node["id"], len(node["members"]),
                                  pack_data(follow, f"what follows group {node['id']}"),
                                  node["ttl"]))
            for index, member in enumerate(node["members"]):
                self._plan(member, value, has_value, member_join(node, index, after), writes,
                           now_ms, max_bytes)

    def _plan_task(self, node: Node, value: Any, has_value: bool, follow: Continuation,
                   writes: _Writes, now_ms: int, max_bytes: int) -> None:
        args = list(node["args"])
        if has_value and not node["imm"]:
            args.insert(0, value)
        due_ms = node.get("eta") or (now_ms + node["delay"] if node.get("delay") else 0)
        frame = None
        if follow is not None or node["err"]:
            fields: Dict[str, Any] = {"v": FRAME_VERSION, "next": follow, "err": node["err"],
                                      "max": max_bytes}
            if writes.wid:  # absent from frames of older minitasks: they name no workflow
                fields["w"] = writes.wid
            frame = pack_data(fields, f"the workflow of task {node['task']!r}")
        message = Message(id=node["id"], task=node["task"], args=args, kwargs=node["kwargs"],
                          queue=node["q"], priority=node["p"], enqueued_at_ms=now_ms,
                          eta_ms=due_ms if due_ms > now_ms else None, workflow=frame)
        check_arguments(message.task, message.args, message.kwargs)
        body = encode_message(message)
        if len(body) > max_bytes:
            raise MessageTooLarge(
                f"task {message.task!r}: workflow step {message.id} is a message of "
                f"{len(body)} bytes, over max_message_bytes={max_bytes} (what follows it "
                f"travels in it); pass references instead of data, or shorten the chain",
                task_name=message.task, size=len(body), limit=max_bytes)
        writes.steps.setdefault(message.queue, []).append(
            (message.id, body, message.priority, message.eta_ms or 0, marker_ttl(node),
             _step_flow(node, value)))
        writes.follows[message.id] = (node, follow)

    def _write(self, writes: _Writes, now_ms: int, max_bytes: int, path: Path) -> None:
        """Groups, then steps (checked first: workflow_checks), then what follows empties."""
        calls: List[ScriptCall] = []
        by_queue: Dict[str, List[Tuple[str, str, int, bytes, int]]] = {}
        for group in writes.groups:
            by_queue.setdefault(group[0], []).append(group)
        for queue, groups in by_queue.items():
            k = self.keys(queue)
            tail: List[Any] = [k.group(group_id) for _, group_id, _, _, _ in groups]
            for _, _, size, follow, ttl in groups:
                tail += (size, follow, open_ttl(ttl))
            calls.append(("group_create", queue, (), tail, len(groups)))
        for queue, steps in writes.steps.items():
            k = self.keys(queue)
            for start in range(0, len(steps), SPAWN_CHUNK):
                record, writes.record = writes.record, None  # with the first step only
                calls.append(spawn_call(k, queue, steps[start:start + SPAWN_CHUNK], record,
                                        writes.plan if record is not None else b"",
                                        writes.wid, now_ms))
        skipped = send_steps(self.transport, self.keys, writes.steps, now_ms, calls,
                             self._queues.register_queues) if calls else []
        if skipped:  # a step's marker was there: sent before, or lost
            self._end_lost(writes, skipped, now_ms, max_bytes, path)
        for waiting in writes.empty:
            self._resume(waiting, [], now_ms, max_bytes, path, writes.wid, writes)
