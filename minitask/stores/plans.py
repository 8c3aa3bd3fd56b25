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
``tree`` turns a record back into plain dicts, refusing what minitask did not write.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import DecodeError

#: Version of a plan record; an unknown one is a DecodeError.
PLAN_VERSION = 1
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


class _Packer:
    """Packs a plan node (as ``minitask.canvas`` compiles it), within the budget."""

    def __init__(self) -> None:
        self.names: Dict[str, int] = {}
        self.queues: Dict[str, int] = {}
        self.budget = TASKS_SHOWN

    def node(self, node: Dict[str, Any]) -> List[Any]:
        kind = node["k"]
        if kind == "t":
            self.budget -= 1
            return ["t", node["id"], self.names.setdefault(node["task"], len(self.names)),
                    self.queues.setdefault(node["q"], len(self.queues))]
        if kind == "c":
            return ["c", *self.items(node["steps"])]
        if kind == "g":
            return ["g", node["id"], *self.items(node["members"])]
        return ["h", node["id"], *self.items(node["header"]), self.node(node["body"])]

    def items(self, nodes: List[Dict[str, Any]]) -> List[Any]:
        """The packed items kept, and how many are left out."""
        kept = []
        for node in nodes[:LIST_SHOWN]:
            if self.budget <= 0:
                break
            kept.append(self.node(node))
        return [kept, len(nodes) - len(kept)]


def pack_plan(workflow_id: str, node: Dict[str, Any], now_ms: int) -> Dict[str, Any]:
    """The plan record of a compiled workflow (msgpack-ready)."""
    packer = _Packer()
    root = packer.node(node)
    return {"v": PLAN_VERSION, "id": workflow_id, "at": now_ms, "n": list(packer.names),
            "q": list(packer.queues), "root": root}


def tree(record: Any) -> Dict[str, Any]:
    """A plan record as plain dicts: ``{"kind": "chain", "steps", "more"}``, ``{"kind":
    "group", "id", "members", "more"}``, ``{"kind": "chord", "id", "header", "more",
    "body"}`` and ``{"kind": "task", "id", "task", "queue"}``.

    Raises:
        DecodeError: the record is not one this minitask wrote (or of a newer one).
    """
    if not isinstance(record, dict) or record.get("v") != PLAN_VERSION:
        version = record.get("v") if isinstance(record, dict) else None
        raise DecodeError(f"cannot read the workflow plan record: version {version!r} "
                          f"(this minitask reads version {PLAN_VERSION})")
    names, queues = record.get("n"), record.get("q")
    if not (isinstance(names, list) and isinstance(queues, list) and _strings(names)
            and _strings(queues)):
        raise DecodeError("cannot read the workflow plan record: its name tables are not "
                          "lists of text")
    _within_budget(record.get("root"))
    return _unpack(record.get("root"), names, queues, 0)


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


def _unpack(node: Any, names: List[str], queues: List[str], depth: int) -> Dict[str, Any]:
    bad = DecodeError(f"cannot read the workflow plan record: a node is not one minitask "
                      f"wrote ({str(node)[:80]})")
    if depth > MAX_DEPTH or not isinstance(node, list) or not node:
        raise bad
    kind, size = node[0], len(node)
    if kind == "t" and size == 4 and isinstance(node[1], str) and _index(node[2], names) \
            and _index(node[3], queues):
        return {"kind": "task", "id": node[1], "task": names[node[2]], "queue": queues[node[3]]}
    if kind == "c" and size == 3 and _count(node[2]):
        return {"kind": "chain", "steps": _many(node[1], names, queues, depth, bad),
                "more": node[2]}
    if kind == "g" and size == 4 and isinstance(node[1], str) and _count(node[3]):
        return {"kind": "group", "id": node[1],
                "members": _many(node[2], names, queues, depth, bad), "more": node[3]}
    if kind == "h" and size == 5 and isinstance(node[1], str) and _count(node[3]):
        return {"kind": "chord", "id": node[1],
                "header": _many(node[2], names, queues, depth, bad), "more": node[3],
                "body": _unpack(node[4], names, queues, depth + 1)}
    raise bad


def _many(nodes: Any, names: List[str], queues: List[str], depth: int,
          bad: DecodeError) -> List[Dict[str, Any]]:
    if not isinstance(nodes, list):
        raise bad
    return [_unpack(node, names, queues, depth + 1) for node in nodes]


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
    """The task dicts of a ``tree`` node, in the order they would run."""
    if node["kind"] == "task":
        return [node]
    return [task for part in parts_of(node) for task in tasks_of(part)]


def workflow_id_of(frame: Optional[Dict[str, Any]]) -> str:
    """The workflow id a frame carries ('' for none, or for one not minitask's)."""
    wid = frame.get("w") if isinstance(frame, dict) else None
    return wid if isinstance(wid, str) else ""
