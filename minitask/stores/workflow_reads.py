"""Reading what workflows leave in Redis: handle records and the state of steps.

``WorkflowStore`` (``workflows.py``) writes them as workflows start and go on; a
handle rebuilt in another process reads them here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..broker.keys import check_name
from ..errors import DecodeError
from ..printable import printable, shown_value
from ..wire.message import MAX_ID_BYTES, MAX_MS, Message
from ..wire.serializer import pack_data, unpack_data
from .bounds import TooLarge, read_fields, too_large
from .foreign import ignored, raise_refusals, text_of
from .plans import PLAN_BYTES
from .store import Store

#: Version of the frame a message carries; an unknown one is a DecodeError.
FRAME_VERSION = 1


@dataclass(frozen=True)
class Failure:
    """The step that ended dead, as the steps it cancels report it."""

    task_id: str
    task: str
    exc_type: str
    message: str
    traceback: str

    def packed(self) -> bytes:
        return pack_data([self.task_id, self.task, self.exc_type, self.message,
                          self.traceback], "a workflow failure")

    @classmethod
    def unpacked(cls, data: bytes) -> "Failure":
        fields = unpack_data(data, "a workflow failure")
        if not isinstance(fields, list) or len(fields) != 5 or not all(
                isinstance(part, str) for part in fields):  # not minitask's: say so
            raise DecodeError(f"a workflow failure is not what minitask writes: "
                              f"{shown_value(fields)}")
        return cls(*fields)


def frame_of(message: Message) -> Optional[Dict[str, Any]]:
    """The workflow frame a message carries, or None for a plain task.

    Raises:
        DecodeError: the frame is corrupt or of an unknown version.
    """
    if message.workflow is None:
        return None
    what = f"the workflow frame (field 'wf') of message {message.id!r}"
    frame = unpack_data(message.workflow, what)
    version = frame.get("v") if isinstance(frame, dict) else None
    if type(version) is int and version > FRAME_VERSION:
        raise DecodeError(f"cannot decode {what}: written by a newer minitask (frame version "
                          f"{version}; this minitask reads version {FRAME_VERSION}): upgrade "
                          f"minitask here")
    if not isinstance(frame, dict) or version != FRAME_VERSION:
        raise DecodeError(f"cannot decode {what}: unknown version (this minitask reads "
                          f"version {FRAME_VERSION})")
    problem = _frame_problem(frame)
    if problem is not None:
        raise DecodeError(f"cannot decode {what}: {problem}; a producer other than minitask "
                          f"wrote it")
    return frame


#: The kinds of node a workflow sends: a task, a chain, a group, a chord.
_NODE_KINDS = ("t", "c", "g", "h")


def _shown(value: Any) -> str:
    return shown_value(value)


def is_join(node: Any) -> bool:
    """Whether ``node`` is the join of a group as minitask writes it (``workflow_links.
    member_join``): its queue and id text, its index, ttl and size (none in the frames
    of an older minitask) whole numbers, which group_join.lua is sent."""
    return isinstance(node, dict) and node.get("k") == "join" and all(
        isinstance(node.get(name), str) for name in ("q", "id")) and all(
        type(node.get(name)) is int for name in ("i", "ttl")) and type(node.get("n", 0)) is int


def _frame_problem(frame: Dict[str, Any]) -> Optional[str]:
    """What makes a frame of the right version one no minitask writes, naming the
    field; None for one it does. A worker reads it before the task runs (``frame_of``),
    so that carrying the workflow on after the task never trips on it."""
    if "max" not in frame:
        return "field 'max' is missing"
    if type(frame["max"]) is not int or frame["max"] <= 0:
        return f"field 'max' is {_shown(frame['max'])}; expected a positive int"
    errbacks = frame.get("err")
    if errbacks is not None and (type(errbacks) is not list or not all(
            isinstance(node, dict) and node.get("k") in _NODE_KINDS for node in errbacks)):
        return f"field 'err' is {_shown(errbacks)}; expected an array of error callbacks"
    for errback in errbacks or ():  # sent if the task fails: read as a next step is
        problem = node_problem(errback)
        if problem is not None:
            return f"field 'err' holds an error callback {problem}"
    node = frame.get("next")
    if isinstance(node, dict) and node.get("k") == "then":
        problem = node_problem(node.get("node"))  # the step sent once this task ends
        if problem is not None:
            return f"field 'next' holds a step {problem}"
    while isinstance(node, dict) and node.get("k") == "then" and isinstance(
            node.get("node"), dict) and node["node"].get("k") in _NODE_KINDS:
        node = node.get("next")
    if node is None or is_join(node):
        return None
    return f"field 'next' holds {_shown(node)}, which is no step minitask sends"


#: The fields of each kind of node a worker's plan reads, and the types they hold.
_NODE_FIELDS: Dict[str, Tuple[Tuple[str, Any], ...]] = {
    "t": (("id", str), ("task", str), ("q", str), ("p", int), ("ttl", int), ("args", list),
          ("kwargs", dict), ("imm", bool), ("err", list), ("delay", (int, type(None))),
          ("eta", (int, type(None)))),
    "c": (("steps", list),),
    # a group or chord without a task (``group()``) has no queue: q is None
    "g": (("id", str), ("q", (str, type(None))), ("ttl", int), ("members", list)),
    "h": (("id", str), ("q", (str, type(None))), ("ttl", int), ("header", list),
          ("body", dict)),
}


def node_problem(node: Any) -> Optional[str]:
    """What a worker planning ``node`` (sending it once a step ends) would trip on,
    or None: the fields each node it sends at once holds (a chain's first step, the
    members of a group or of a chord's header; later steps are checked before their
    own turn), walked without recursion, so that nesting of any depth is read."""
    pending = [node]
    while pending:
        node = pending.pop()
        kind = node.get("k") if isinstance(node, dict) else None
        fields = _NODE_FIELDS.get(kind) if isinstance(kind, str) else None
        if fields is None or not isinstance(kind, str):
            return f"{_shown(node)}, which is no step minitask sends"
        for name, kinds in fields:
            if name not in node or not isinstance(node[name], kinds) or (
                    kinds is int and isinstance(node[name], bool)):
                return f"of kind {kind!r} whose field {name!r} is {_shown(node.get(name))}"
        if kind == "c" and not node["steps"]:
            return "of kind 'c' without steps"
        problem = _value_problem(kind, node)
        if problem is not None:
            return f"of kind {kind!r} whose {problem}"
        pending.extend(node["steps"][:1] if kind == "c" else
                       node["members"] if kind == "g" else node["header"] if kind == "h" else ())
    return None


def _value_problem(kind: str, node: Dict[str, Any]) -> Optional[str]:
    """A value of a node's fields that no producer sends (a priority of 10, a queue
    name that would break the key layout, an id longer than any), or None: a step
    planned with it would be written where no worker finds it."""
    if kind not in ("t", "g", "h"):
        return None
    if not 0 < len(node["id"].encode()) <= MAX_ID_BYTES:
        return f"id is {len(node['id'].encode()):,} bytes (1 to {MAX_ID_BYTES})"
    if node["q"] is not None:
        try:
            check_name("queue", node["q"])
        except ValueError as exc:
            return f"queue: {exc}"
    if kind == "t":
        if not 0 <= node["p"] <= 9:
            return f"priority is {node['p']} (0 to 9)"
        for name in ("eta", "delay"):
            if node[name] is not None and not 0 <= node[name] <= MAX_MS:
                return f"{name} is {node[name]} (0 to {MAX_MS} ms)"
    return None


#: Bytes of a workflow id read from a marker: one minitask writes is a task id, bound
#: as a plan record's ids are.
WORKFLOW_ID_BYTES = MAX_ID_BYTES


def _workflow_id(key: str, found: Any) -> str:
    """The workflow id a marker's ``w`` field holds; '' for none, or for one no
    minitask wrote (not UTF-8, or longer than ``WORKFLOW_ID_BYTES``: said once)."""
    if not isinstance(found, bytes):
        return ""
    if len(found) > WORKFLOW_ID_BYTES:
        ignored(key, f"its workflow id is longer than {WORKFLOW_ID_BYTES} bytes")
        return ""
    return text_of(found) or ""


#: Bytes of a handle record read at most (``GETRANGE``): a group's record holds each
#: member's first and last task (about 100 bytes a member with uuid ids), so 4 MB is
#: a group of some 40,000 members. A larger one is refused before it is unpacked (a
#: planted 59 MB record took 2.7 GB and 138 s to read whole).
HANDLE_BYTES = 4 * 1024 * 1024


def handle_record_of(key: str, data: Any) -> Any:
    """A handle record as read from ``key`` (at most ``HANDLE_BYTES`` + 1 bytes of it):
    None when there is none, or when the key holds what minitask did not write
    (another type, other bytes), said once.

    Raises:
        DecodeError: the record is larger than ``HANDLE_BYTES``, naming the key.
    """
    if isinstance(data, Exception):
        ignored(key, f"it holds another type than a string ({data})")
        return None
    if not isinstance(data, bytes) or data == b"":  # GETRANGE of no key: b""
        return None
    if len(data) > HANDLE_BYTES:
        raise DecodeError(f"the handle record {printable(key)} is larger than "
                          f"{HANDLE_BYTES:,} bytes (HANDLE_BYTES, a group of some 40,000 "
                          f"members); it is not read")
    try:
        return unpack_data(data, f"the handle record {key}")
    except DecodeError as exc:
        ignored(key, str(exc))
        return None


def first_record(found: Iterable[Tuple[str, Any]]) -> Any:
    """The first handle record of ``found`` (key, what a read of it answered: bytes,
    or the error of a key of another type), unpacked, or None when none has one.

    Raises:
        DecodeError: none has one, but a key holds what no minitask wrote (another
            type, other bytes): naming the first such, not "never sent", which a
            reader would take None for; or a record is larger than ``HANDLE_BYTES``.
    """
    odd = ""
    for key, data in found:
        record = handle_record_of(key, data)
        if record is not None:
            return record
        if not odd and (isinstance(data, Exception) or isinstance(data, bytes) and data):
            odd = f"the handle record {printable(key)} holds " + (
                "another type than the string minitask keeps there"
                if isinstance(data, Exception) else "no record minitask writes")
    if odd:
        raise DecodeError(f"{odd}: no minitask wrote it, and it cannot be read")
    return None


def promised_queue(record: Any) -> Optional[str]:
    """The queue a handle record (``{"t": queue}``) says a later step goes to."""
    if isinstance(record, dict) and isinstance(record.get("t"), str) and record["t"]:
        return str(record["t"])
    return None


def _plan_of(data: Any) -> Tuple[Any, str]:
    """A plan record as read, unpacked (None for none), or why it cannot be one
    minitask wrote."""
    if isinstance(data, Exception):
        return None, f"it holds another type than a string ({data})"
    if not isinstance(data, bytes) or not data:
        return None, ""
    if len(data) > PLAN_BYTES:
        return None, (f"the plan record is larger than the {PLAN_BYTES} bytes of any "
                      f"minitask writes")
    try:
        return unpack_data(data, "the plan record"), ""
    except DecodeError as exc:
        return None, f"the plan record is unreadable: {exc}"


class WorkflowReads(Store):
    """What a handle reads of a workflow, and the one record it drops."""

    scripts: Tuple[str, ...] = ("hash_fields",)

    def handle_record(self, some_id: str, queues: Sequence[str]) -> Any:
        """The handle record ``start`` wrote for ``some_id`` under one of ``queues``,
        unpacked, or None when there is none (never written, or expired), in one round
        trip where the connection allows. A key minitask did not write (another type,
        other bytes) is passed over, said once, but when no other holds a record it is
        a DecodeError naming it, as is one larger than ``HANDLE_BYTES`` (at most that
        many bytes of each key are read)."""
        return self._first_record([self.keys(queue).handle(some_id) for queue in queues],
                                  f"read the handle record of {some_id}")

    def plan(self, workflow_id: str, queues: Sequence[str],
             say: bool = True) -> Optional[Tuple[str, Any]]:
        """The key and the plan record (plans.py) ``start`` wrote for ``workflow_id``
        under one of ``queues``, unpacked, or None, as ``handle_record`` reads it; at
        most ``PLAN_BYTES`` + 1 bytes of each key are read.

        Raises:
            DecodeError: the record is larger than ``PLAN_BYTES``, is not msgpack (or
                holds text that is not UTF-8), or the key holds another type than a
                string: naming its key (said once in the log too, unless not ``say``:
                a caller that prints the error, as the CLI does, says it once).
        """
        keys = [self.keys(queue).workflow(workflow_id) for queue in queues]
        if not keys:
            return None
        with self.transport.errors(f"read the plan of workflow {workflow_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.getrange(key, 0, PLAN_BYTES)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for key, data in zip(keys, replies):
            record, problem = _plan_of(data)
            if problem:
                if say:
                    ignored(key, problem)
                raise DecodeError(f"{printable(key)}: {problem}")
            if isinstance(data, bytes) and data:  # a msgpack nil too: tree() refuses it
                return key, record
        return None

    def workflow_of(self, queue: str, task_id: str) -> str:
        """The id of the workflow whose step ``task_id`` (of ``queue``) is, as its marker
        names it; '' when it is none's (a plain task, or a step of an older minitask)."""
        key = self.keys(queue).once(task_id)
        # measured first: a workflow id longer than any is never read (hash_fields.lua)
        found = read_fields(self.transport, [(key, "w", WORKFLOW_ID_BYTES)],
                            f"read the workflow of {task_id}")[0]
        if isinstance(found, Exception):
            ignored(key, f"it holds another type than a hash ({found})")
        elif isinstance(found, TooLarge):
            too_large(key, "w", found.length, WORKFLOW_ID_BYTES)
            return ""
        return _workflow_id(key, found)

    def _first_record(self, keys: List[str], doing: str) -> Any:
        """The first of ``keys`` that holds a record minitask wrote, unpacked, or None,
        in one round trip where the connection allows."""
        if not keys:
            return None
        with self.transport.errors(doing):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.getrange(key, 0, HANDLE_BYTES)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        return first_record(zip(keys, replies))

    def drop_handle_record(self, some_id: str, queues: Sequence[str]) -> None:
        """Delete the handle record of ``some_id`` under each of ``queues`` (one key
        per command: each under its own tag). Once the task it promises is forgotten,
        it would have ``get()`` wait for a result that will never come."""
        keys = [self.keys(queue).handle(some_id) for queue in queues]
        if not keys:
            return
        with self.transport.errors(f"delete the handle record of {some_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.delete(key)
            pipe.execute()
