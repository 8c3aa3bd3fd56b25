"""Plan records: a workflow's shape, kept so that it can be drawn as a whole.

``WorkflowStore.start`` writes one, packed, under ``workflow:<id>`` (the id of the
workflow's handle) in the same script call as its first tasks, expiring with its
results. It holds the tree of the workflow (chains, groups, chords) with each
task's id, name and queue, and nothing of their arguments. It is bounded: a list
of steps or members keeps its first ``LIST_SHOWN`` items and the whole record at
most ``TASKS_SHOWN`` tasks; what is left out is counted (``more``), so a group of
10,000 members makes a record of a few kB.

Packed, a node is a list: ``["t", id, name, queue]`` a task (name and queue as
indexes into the record's ``n`` and ``q`` tables), ``["c", steps, more]`` a chain,
``["g", id, members, more]`` a group, ``["h", id, header, more, body]`` a chord.
Since version 2 each node ends with its error callbacks, ``[tasks, more]``: those
declared on that part of the workflow (``on_error``), kept where they were declared
(the highest node all of whose tasks carry them), within the same budget; and the
record's ``l`` table holds each task name's result ttl (ms), in the order of ``n``.
The record's ``s`` counts the workflow's steps (its tasks, error callbacks aside),
kept or not, so that what reads it can say the workflow's true size.
``tree`` turns a record back into plain dicts, refusing what minitask did not write
(it reads version 1 records too: no error callbacks, no ttls): a node of an unknown
shape, an error callback that is no task, a queue name no queue may have, a task
name that is not printable or longer than ``MAX_NAME``, a task or group id longer
than ``MAX_ID_BYTES``, a result ttl no option may name; each refusal says which.
Whatever a record holds, what is read of it is then bounded by the packer's own
budgets: at most ``TASKS_SHOWN`` tasks, each with names of at most ``MAX_NAME``
characters and ids of at most ``MAX_ID_BYTES``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from ..broker.keys import MAX_NAME, check_name
from ..errors import DecodeError
from ..wire.message import MAX_ID_BYTES, MAX_SECONDS, unprintable

#: Version of a plan record; an unknown one is a DecodeError.
PLAN_VERSION = 2
#: Versions ``tree`` reads (1: written before error callbacks were kept).
READ_VERSIONS = (1, 2)
#: Items of one chain, group or chord header a record keeps (the first ones).
LIST_SHOWN = 50
#: Tasks a record keeps at most, over the whole workflow.
TASKS_SHOWN = 500
#: Nodes nested deeper than this are no record minitask wrote.
MAX_DEPTH = 64
#: Bytes of a plan record read at most. One minitask writes is a few kB (at most
#: ``TASKS_SHOWN`` tasks, each an id and two small indexes, the names said once):
#: 256 kB leaves room for 500 ids of 400 bytes; a larger record is not minitask's
#: and is refused before it is unpacked.
PLAN_BYTES = 256 * 1024
#: Lists (nodes and their lists of items) a record holds at most when read: the
#: packer keeps ``LIST_SHOWN`` items a list and ``TASKS_SHOWN`` tasks; nesting of
#: empty groups past this is refused, so reading and drawing a record stay bounded.
LISTS_READ = 8 * TASKS_SHOWN
#: A ``more`` count above this (a billion items left out) is not minitask's.
MORE_MOST = 10 ** 9
#: The longest result ttl a record's ``l`` table holds, in ms: the longest an option
#: may name (``MAX_SECONDS``, 100 years).
MAX_TTL_MS = MAX_SECONDS * 1000
# MAX_ID_BYTES (wire.message): the longest task or group id a record holds, in
# UTF-8 bytes; a workflow id read from a step's marker has the same bound
# (``workflow_reads.WORKFLOW_ID_BYTES``), and ``canvas`` refuses a step's chosen
# ``task_id`` longer than this, so every record minitask writes is read. One minitask
# makes is 22 characters.


class _Packer:
    """Packs a plan node (as ``minitask.canvas`` compiles it), within the budget."""

    def __init__(self) -> None:
        self.names: Dict[str, int] = {}
        self.queues: Dict[str, int] = {}
        self.ttls: Dict[str, int] = {}
        self.budget = TASKS_SHOWN

    def node(self, node: Dict[str, Any], above: Tuple[str, ...] = ()) -> List[Any]:
        """``above``: the ids of the error callbacks a node higher up already keeps."""
        kind = node["k"]
        errbacks = [err for err in _common_errbacks(node) if err["id"] not in above]
        below = above + tuple(err["id"] for err in errbacks)
        if kind == "t":
            packed = self.task(node)
        elif kind == "c":
            packed = ["c", *self.items(node["steps"], below)]
        elif kind == "g":
            packed = ["g", node["id"], *self.items(node["members"], below)]
        else:
            packed = ["h", node["id"], *self.items(node["header"], below),
                      self.node(node["body"], below)]
        return packed + [self.items(errbacks, below)]

    def task(self, node: Dict[str, Any]) -> List[Any]:
        self.budget -= 1
        name = _kept_name(node["task"])
        self.ttls.setdefault(name, int(node.get("ttl") or 0))
        return ["t", node["id"], self.names.setdefault(name, len(self.names)),
                self.queues.setdefault(node["q"], len(self.queues))]

    def items(self, nodes: List[Dict[str, Any]], above: Tuple[str, ...]) -> List[Any]:
        """The packed items kept, and how many are left out."""
        kept = []
        for node in nodes[:LIST_SHOWN]:
            if self.budget <= 0:
                break
            kept.append(self.node(node, above))
        return [kept, len(nodes) - len(kept)]


def _kept_name(name: str) -> str:
    """A task name as a plan keeps it: at most ``MAX_NAME`` characters (a longer one
    cut, ending with an ellipsis), as the reader accepts it."""
    return name if len(name) <= MAX_NAME else name[:MAX_NAME - 1] + "\u2026"


def _common_errbacks(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The error callbacks every task under ``node`` carries (as canvas/compiler.py
    compiles them, each task lists those of every part it is in), in their order."""
    first: List[Dict[str, Any]] = []
    shared: Optional[Set[str]] = None
    for task in _walk(node):  # lazily: a workflow without error callbacks stops at once
        errs = task.get("err") or []
        if shared is None:
            first, shared = errs, {err["id"] for err in errs}
        else:
            shared &= {err["id"] for err in errs}
        if not shared:
            return []
    return [err for err in first if err["id"] in (shared or ())]


def task_nodes(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The task nodes of a plan node (as ``minitask.canvas`` compiles it), in the
    order they would run (a chord's header before its body); error callbacks are not
    part of it."""
    return list(_walk(node))


def _walk(node: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    kind = node["k"]
    if kind == "t":
        yield node
        return
    parts = (node["steps"] if kind == "c" else node["members"] if kind == "g"
             else node["header"] + [node["body"]])
    for part in parts:
        yield from _walk(part)


def pack_plan(workflow_id: str, node: Dict[str, Any], now_ms: int) -> Dict[str, Any]:
    """The plan record of a compiled workflow (msgpack-ready)."""
    packer = _Packer()
    root = packer.node(node)
    return {"v": PLAN_VERSION, "id": workflow_id, "at": now_ms, "n": list(packer.names),
            "q": list(packer.queues), "l": [packer.ttls[name] for name in packer.names],
            "root": root, "s": len(task_nodes(node))}


def tree(record: Any) -> Dict[str, Any]:
    """A plan record as plain dicts: ``{"kind": "chain", "steps", "more"}``, ``{"kind":
    "group", "id", "members", "more"}``, ``{"kind": "chord", "id", "header", "more",
    "body"}`` and ``{"kind": "task", "id", "task", "queue", "ttl"}`` (``ttl`` the
    result ttl in ms, 0 when the record does not say). Every node has ``on_error``
    (the task dicts of its error callbacks) and ``on_error_more`` (those left out).

    Raises:
        DecodeError: the record is not one this minitask wrote (or of a newer one).
    """
    version = record.get("v") if isinstance(record, dict) else None
    if version not in READ_VERSIONS:
        raise DecodeError(f"cannot read the workflow plan record: version {version!r} "
                          f"(this minitask reads versions up to {PLAN_VERSION})")
    names, queues = record.get("n"), record.get("q")
    if not (_strings(names) and _strings(queues)):
        raise DecodeError("cannot read the workflow plan record: its name tables are not "
                          "lists of text")
    ttls = record.get("l", [0] * len(names))
    _check_ttls(ttls, len(names))
    _check_names(names, queues)
    _within_budget(record.get("root"))
    return _Reader(names, queues, ttls, version == 2).node(record.get("root"), 0)


def _check_ttls(ttls: Any, names: int) -> None:
    """Refuse a ttl table minitask does not write: one whole number of ms a task name,
    each a result ttl an option may name (0 to ``MAX_TTL_MS``)."""
    if not isinstance(ttls, list) or len(ttls) != names:
        raise DecodeError(f"cannot read the workflow plan record: its ttl table is not a "
                          f"list of one result ttl per task name ({names} names)")
    for ttl in ttls:
        if not (type(ttl) is int and 0 <= ttl <= MAX_TTL_MS):
            raise DecodeError(f"cannot read the workflow plan record: its ttl table holds "
                              f"{str(ttl)[:40]!r}, no result ttl minitask writes (a whole "
                              f"number of ms from 0 to {MAX_TTL_MS}, 100 years)")


def _node_id(node_id: Any, what: str) -> bool:
    """Whether ``node_id`` is a task or group id a plan record may hold: text of at
    most ``MAX_ID_BYTES`` (a longer one is refused, naming ``what``: a task id minitask
    writes is 22 characters; a chosen one longer than this is refused when sent)."""
    if not isinstance(node_id, str):
        return False
    size = len(node_id.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise DecodeError(f"cannot read the workflow plan record: a {what} id of {size:,} "
                          f"bytes ({node_id[:40]!r}...) is longer than any minitask writes "
                          f"(at most {MAX_ID_BYTES})")
    return True


def _check_names(names: List[str], queues: List[str]) -> None:
    """Refuse name tables minitask does not write: a queue name a queue may not have
    (``check_name``: at most ``MAX_NAME`` characters, no braces, colons, spaces or
    control characters), a task name empty, unprintable or longer than ``MAX_NAME``
    (the packer cuts longer ones). Each name is said to at most 40 characters."""
    for queue in queues:
        try:
            check_name("queue", queue)
        except ValueError as exc:
            raise DecodeError(f"cannot read the workflow plan record: its queue table "
                              f"holds no queue minitask sends to ({exc})") from None
    for name in names:
        char = unprintable(name)
        if not name or len(name) > MAX_NAME or char is not None:
            why = ("is empty" if not name else f"is {len(name)} characters long (at most "
                   f"{MAX_NAME})" if len(name) > MAX_NAME else f"holds {char!r}")
            raise DecodeError(f"cannot read the workflow plan record: the task name "
                              f"{name[:40]!r}{'...' if len(name) > 40 else ''} of its name "
                              f"table {why}")


def _within_budget(root: Any) -> None:
    """Refuse a packed tree larger than any the packer writes (more than
    ``LIST_SHOWN`` items in a list, ``TASKS_SHOWN`` tasks, ``LISTS_READ`` lists or
    ``MAX_DEPTH`` levels), walking it without recursion before it is converted."""
    stack, lists, tasks = [(root, 0)], 0, 0
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, list):
            continue
        lists += 1
        tasks += value[:1] == ["t"]
        if len(value) > LIST_SHOWN or lists > LISTS_READ or tasks > TASKS_SHOWN \
                or depth > 2 * MAX_DEPTH + 2:
            raise DecodeError(f"cannot read the workflow plan record: it is larger than "
                              f"any minitask writes (at most {LIST_SHOWN} items a list, "
                              f"{TASKS_SHOWN} tasks, {LISTS_READ} lists, {MAX_DEPTH} "
                              f"levels)")
        stack.extend((item, depth + 1) for item in value)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class _Reader:
    """Unpacks the nodes of one record, checking each is as minitask writes it."""

    def __init__(self, names: List[str], queues: List[str], ttls: List[int],
                 errbacks: bool) -> None:
        self.names, self.queues, self.ttls, self.errbacks = names, queues, ttls, errbacks

    def node(self, node: Any, depth: int) -> Dict[str, Any]:
        bad = DecodeError(f"cannot read the workflow plan record: a node is not one "
                          f"minitask wrote ({str(node)[:80]})")
        if depth > MAX_DEPTH or not isinstance(node, list) or not node:
            raise bad
        errs: Any = [[], 0]
        if self.errbacks:
            node, errs = node[:-1], node[-1]
            if not (isinstance(errs, list) and len(errs) == 2 and _count(errs[1])):
                raise bad
        found = self.shape(node, depth, bad)
        found["on_error"] = self.errbacks_in(errs[0], depth, bad)
        found["on_error_more"] = errs[1]
        return found

    def errbacks_in(self, nodes: Any, depth: int, bad: DecodeError) -> List[Dict[str, Any]]:
        """Error callbacks, as the packer writes them: task nodes, with none of their
        own (a group or a chain there is no record minitask wrote)."""
        found = self.many(nodes, depth, bad)
        for errback in found:
            kind = errback["kind"]
            if kind != "task" or errback["on_error"] or errback["on_error_more"]:
                what = "a task with error callbacks of its own" if kind == "task" else kind
                raise DecodeError(f"cannot read the workflow plan record: an error "
                                  f"callback is a {what}, not the plain task minitask "
                                  f"writes there")
        return found

    def shape(self, node: List[Any], depth: int, bad: DecodeError) -> Dict[str, Any]:
        kind, size = node[0], len(node)
        if kind == "t" and size == 4 and _node_id(node[1], "task") \
                and _index(node[2], self.names) and _index(node[3], self.queues):
            return {"kind": "task", "id": node[1], "task": self.names[node[2]],
                    "queue": self.queues[node[3]], "ttl": self.ttls[node[2]]}
        if kind == "c" and size == 3 and _count(node[2]):
            return {"kind": "chain", "steps": self.many(node[1], depth, bad),
                    "more": node[2]}
        if kind == "g" and size == 4 and _node_id(node[1], "group") \
                and _count(node[3]):
            return {"kind": "group", "id": node[1],
                    "members": self.many(node[2], depth, bad), "more": node[3]}
        if kind == "h" and size == 5 and _node_id(node[1], "chord") \
                and _count(node[3]):
            return {"kind": "chord", "id": node[1],
                    "header": self.many(node[2], depth, bad), "more": node[3],
                    "body": self.node(node[4], depth + 1)}
        raise bad

    def many(self, nodes: Any, depth: int, bad: DecodeError) -> List[Dict[str, Any]]:
        if not isinstance(nodes, list):
            raise bad
        return [self.node(node, depth + 1) for node in nodes]


def _index(value: Any, table: List[str]) -> bool:
    return type(value) is int and 0 <= value < len(table)


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MORE_MOST


def parts_of(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The nodes right under a ``tree`` node: a chain's steps, a group's members, a
    chord's header then its body; none under a task."""
    kind = node["kind"]
    return (node["steps"] if kind == "chain" else node["members"] if kind == "group"
            else node["header"] + [node["body"]] if kind == "chord" else [])


def tasks_of(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The task dicts of a ``tree`` node, in the order they would run (error
    callbacks not among them: ``errbacks_of``)."""
    if node["kind"] == "task":
        return [node]
    return [task for part in parts_of(node) for task in tasks_of(part)]


def errbacks_of(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The error callbacks (task dicts) kept anywhere in a ``tree`` node."""
    below = [err for part in parts_of(node) for err in errbacks_of(part)]
    return list(node.get("on_error", ())) + below


def workflow_id_of(frame: Optional[Dict[str, Any]]) -> str:
    """The workflow id a frame carries ('' for none, or for one not minitask's)."""
    wid = frame.get("w") if isinstance(frame, dict) else None
    return wid if isinstance(wid, str) else ""
