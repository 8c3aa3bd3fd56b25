"""The links a worker follows from one workflow group to the next, read and bounded.

When a group completes (or fails), what follows it is read from the group's state in
Redis: data anyone could have written. When that ends in the join of another group,
the worker joins that one at once, and so on outwards (a group nested in a group).
Minitask writes these links only outwards, from a group to one that holds it, so a
walk never meets a group twice; state planted to join back into a group already
joined (a cycle) would be walked for ever, and a chain of planted groups as long as
its author likes. Each walk keeps the groups it joined (a ``Path``): a link back into
one of them, or one more than ``JOIN_DEPTH`` groups out, is corrupt state, refused
naming the group, like any other state no minitask wrote.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import DecodeError, EncodeError
from ..printable import shown_id, shown_value
from ..wire.serializer import unpack_data
from .plans import task_nodes
from .workflow_reads import is_join, node_problem

#: Groups one walk joins at most, one holding the next (``group([group([...])])``):
#: a producer refuses to send a workflow whose groups and chords nest deeper
#: (``nesting``), and a walk this long stays well inside Python's recursion limit.
JOIN_DEPTH = 256

#: At most this many tasks that follow a group are named in each member's frame (the
#: first ones and the last, the one a handle waits for): the frame stays small.
AFTER_LIMIT = 100

#: The groups a walk has joined, outermost last: (queue, group id) of each.
Path = Tuple[Tuple[str, str], ...]

#: How long (ms) the state of an open group (a chord's header, a group followed by more
#: steps) lives from its creation or its last member's join, unless its result_ttl is
#: longer: its members may wait that long in their queues (a backlog, no worker) and
#: what follows the group still runs. Once a member failed the group, or what follows
#: it was sent, its state lives its result_ttl; a group whose members can never join
#: (purged from their queue) is gone after this, so nothing is kept for ever.
OPEN_GROUP_TTL_MS = 30 * 24 * 3600 * 1000


def open_ttl(ttl_ms: int) -> int:
    """The ttl (ms) of the state of an open group whose result_ttl is ``ttl_ms``."""
    return max(int(ttl_ms), OPEN_GROUP_TTL_MS)


def marker_ttl(node: Dict[str, Any]) -> int:
    """How long (ms) the marker of task ``node`` lives once it is sent: its ``"mt"``
    (the workflow's longest result ttl, as long as its handle record, which leads to
    the step: a marker gone before it has a step that ran read as one not sent), else
    (a plan of an older minitask, or one all of whose steps keep results as long) its
    result ttl."""
    longer = node.get("mt")
    return longer if type(longer) is int and longer > node["ttl"] else int(node["ttl"])


def member_join(group: Dict[str, Any], index: int, after: Dict[str, Any]) -> Dict[str, Any]:
    """What member ``index`` of ``group`` (a plan's node) joins when it ends: the group's
    queue, id and result ttl, ``"a"`` what follows the group (``after_of``), and ``"n"``
    the group's size. group_join.lua checks the size in the group's state against
    ``"n"``: a size planted there, larger, kept the group open for ever, not a word said,
    and one smaller completed it with results missing. Frames of an older minitask
    carry no ``"n"`` (and are not checked so)."""
    return {"k": "join", "q": group["q"], "id": group["id"], "i": index,
            "n": len(group["members"]), "ttl": group["ttl"], "a": after}


def join_args(join: Dict[str, Any], how: str, payload: bytes, most: int) -> Tuple[Any, ...]:
    """group_join.lua's ARGV for member ``join``'s end (``how``: "ok" or "dead", and
    ``payload`` its packed result or failure); ``most``: the most bytes of a value
    minitask writes in the group. A join with no size (an older minitask's frame, or
    its ``"a"``, which no check reads before) sends '': group_join.lua checks none."""
    size = join.get("n")
    return (join["i"], how, payload, join["ttl"], most, open_ttl(join["ttl"]),
            size if type(size) is int else "")


def after_of(follow: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What follows a group, as each member's frame names it: ``"t"`` the tasks of its
    later steps ([queue, id, ttl], at most ``AFTER_LIMIT``) and ``"j"`` the join of the
    group it ends in, or None."""
    tasks: List[List[Any]] = []
    while follow is not None and follow["k"] == "then":
        tasks += [[task["q"], task["id"], task["ttl"]] for task in task_nodes(follow["node"])]
        follow = follow["next"]
    if len(tasks) > AFTER_LIMIT:
        tasks = tasks[:AFTER_LIMIT - 1] + tasks[-1:]
    return {"t": tasks, "j": follow}


def nesting(node: Dict[str, Any]) -> int:
    """How deep groups and chords nest in one another in a plan node (as
    ``minitask.canvas`` compiles it), walked without recursion: the most groups a walk
    from one of its groups outwards can join."""
    deepest, pending = 0, [(node, 0)]
    while pending:
        node, depth = pending.pop()
        kind = node["k"]
        depth += kind in ("g", "h")
        deepest = max(deepest, depth)
        parts = (node["steps"] if kind == "c" else node["members"] if kind == "g"
                 else [*node["header"], node["body"]] if kind == "h" else ())
        pending.extend((part, depth) for part in parts)
    return deepest


def check_nesting(node: Dict[str, Any], workflow_id: str) -> None:
    """Refuse to send a workflow whose groups nest deeper than a worker follows them.

    Raises:
        EncodeError: naming how deep they nest; a worker would refuse to carry it
            on, as corrupt state.
    """
    deepest = nesting(node)
    if deepest > JOIN_DEPTH:
        raise EncodeError(f"workflow {workflow_id}: its groups and chords nest {deepest} "
                          f"deep, more than the {JOIN_DEPTH} a worker follows (JOIN_DEPTH); "
                          f"nest them less deep", task_name="?", path="workflow")


def end_of(follow: Any) -> Optional[Dict[str, Any]]:
    """The join a continuation ends in (past its ``then`` steps), or None."""
    while isinstance(follow, dict) and follow.get("k") == "then":
        follow = follow.get("next")
    return follow if isinstance(follow, dict) and follow.get("k") == "join" else None


def joined(join: Dict[str, Any], path: Path) -> Path:
    """``path`` with the group ``join`` names, which a walk is about to join.

    Raises:
        DecodeError: that group was joined already in this walk (a cycle), or it is
            more than ``JOIN_DEPTH`` groups out: no state minitask writes.
    """
    group = (join["q"], join["id"])
    if group in path:
        cycle = " -> ".join(shown_id(gid) for _, gid in path[path.index(group):])
        raise DecodeError(f"what follows it joins group {shown_id(join['id'])} again, which "
                          f"this walk joined already (a cycle: {cycle} -> "
                          f"{shown_id(join['id'])}); no state minitask writes")
    if len(path) >= JOIN_DEPTH:
        raise DecodeError(f"what follows it joins groups nested more than {JOIN_DEPTH} "
                          f"deep (JOIN_DEPTH); no state minitask writes")
    return path + (group,)


def follow_of(join: Dict[str, Any], packed: bytes, path: Path) -> Any:
    """What follows group ``join`` (joined last in ``path``), from its state;
    DecodeError when it is none minitask writes (a shape the walks would trip on, or
    one that ends in a group ``path`` holds, or one too far out: ``joined``)."""
    follow: Any = unpack_data(packed, f"what follows group {join['id']}")
    node: Any = follow
    problem = node_problem(node.get("node")) if isinstance(node, dict) and node.get(
        "k") == "then" else None
    while problem is None and isinstance(node, dict) and node.get("k") == "then" and isinstance(
            node.get("node"), dict) and node["node"].get("k") in ("t", "c", "g", "h"):
        node = node.get("next")
    if problem is None and (node is None or is_join(node)):
        if node is not None:
            joined(node, path)
        return follow
    shown = f"a step {problem}" if problem else shown_value(node)
    raise DecodeError(f"what follows group {join['id']} is not what minitask writes "
                      f"there: {shown}")
