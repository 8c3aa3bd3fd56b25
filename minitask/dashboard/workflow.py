"""The workflow page: a chain, group or chord drawn as a graph, in inline SVG.

The server lays the graph out and writes the SVG (no script, no CDN): a chain's
steps left to right, a group's members stacked (a fork before them, a join after),
a chord's header group then its body. Each task is a box coloured by its state
that links to its task page; live.js recolours the boxes as steps change state.
Error callbacks hang under the part of the workflow they were declared on (a task, a
group, a chord, the whole chain): dashed boxes labelled "on error", a dashed line to
each, drawn and linked as steps are.
Every value written into the SVG is escaped (``_tag``:
the standard library's ``html.escape``, quotes included). A group draws at most
``MEMBERS_DRAWN`` members, then a ``+N more`` box counting the rest (those the plan
record left out included).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple
from html import escape
from urllib.parse import quote

from ..admin.workflows import STATES, summary, workflow
from ..app import Minitask
from ..errors import DecodeError
from ..printable import printable

#: Members of one group (or chord header) drawn; the rest make one ``+N more`` box.
MEMBERS_DRAWN = 20
#: Nodes (tasks, chains, groups, chords) drawn over the whole page: those past it
#: are counted in ``+N more`` boxes (a plan minitask writes keeps at most 500 tasks).
NODES_DRAWN = 600
BOX_W, BOX_H = 160, 46
GAP_X, GAP_Y, PAD = 36, 12, 18
#: Fill and border of a task box, by state.
COLORS: Dict[str, Tuple[str, str]] = {
    "pending": ("#eceff1", "#90a4ae"), "queued": ("#e3f2fd", "#1e88e5"),
    "scheduled": ("#ede7f6", "#7e57c2"), "running": ("#fff8e1", "#f9a825"),
    "retrying": ("#fff3e0", "#ef6c00"), "succeeded": ("#e8f5e9", "#2e7d32"),
    "failed": ("#ffebee", "#c62828"), "dead": ("#f8bbd0", "#ad1457"),
    "cancelled": ("#f5f5f5", "#616161"), "expired": ("#fafafa", "#bdbdbd"),
    "unknown": ("#fafafa", "#757575"), "unreadable": ("#fff8e1", "#c62828"),
    "gone": ("#fafafa", "#8d6e63"),
    "more": ("#ffffff", "#9e9e9e"),
}
assert set(STATES) <= set(COLORS)


@dataclass
class Block:
    """A laid-out part of the graph: its size, what it draws (relative to its top
    left corner), and where arrows enter and leave it (y, from its top)."""

    width: int
    height: int
    shapes: List[Tuple[str, Dict[str, Any]]] = field(default_factory=list)
    entry: int = 0
    exit: int = 0

    def place(self, into: "Block", x: int, y: int) -> None:
        for kind, spec in self.shapes:
            moved = dict(spec)
            for name in ("x", "x1", "x2"):
                if name in moved:
                    moved[name] += x
            for name in ("y", "y1", "y2"):
                if name in moved:
                    moved[name] += y
            into.shapes.append((kind, moved))


def layout(node: Dict[str, Any]) -> Block:
    """The block of a plan tree node (admin/workflows.py: ``kind`` task, chain, group
    or chord; a task has a ``state``), with its error callbacks under it."""
    kind = node["kind"]
    if kind == "task":
        block = _box(node)
    elif kind == "chain":
        block = _row([layout(step) for step in node["steps"]] + _more(node["more"]))
    elif kind == "group":
        block = _stack(node["members"], node["more"], f"group {node['id']}")
    else:
        header = _stack(node["header"], node["more"], f"chord {node['id']}")
        block = _row([header, layout(node["body"])])
    return _with_errbacks(block, node.get("on_error") or [], node.get("on_error_more", 0))


def _with_errbacks(block: Block, errbacks: List[Dict[str, Any]], more: int) -> Block:
    """``block`` with its error callbacks in a row under it (dashed boxes labelled
    "on error"), a dashed line from its bottom edge to each."""
    boxes = [Block(BOX_W, BOX_H, [("errback", {"x": 0, "y": 0, "task": errback})])
             for errback in errbacks[:MEMBERS_DRAWN]]
    boxes += _more(more + max(0, len(errbacks) - MEMBERS_DRAWN))
    if not boxes:
        return block
    top = block.height + GAP_Y + 18  # room for the label above the boxes
    row = len(boxes) * (BOX_W + GAP_X) - GAP_X
    whole = Block(max(block.width, row), top + BOX_H, entry=block.entry, exit=block.exit)
    block.place(whole, 0, 0)
    left = max(0, (block.width - row) // 2)  # the row centred under what it belongs to
    for index, box in enumerate(boxes):
        x = left + index * (BOX_W + GAP_X)
        box.place(whole, x, top)
        whole.shapes.append(("dashed", {"x1": block.width // 2, "y1": block.height,
                                        "x2": x + BOX_W // 2, "y2": top - 16}))
    return whole


def _box(task: Dict[str, Any]) -> Block:
    block = Block(BOX_W, BOX_H, entry=BOX_H // 2, exit=BOX_H // 2)
    block.shapes.append(("task", {"x": 0, "y": 0, "task": task}))
    return block


def _more(count: int) -> List[Block]:
    if not count:
        return []
    block = Block(BOX_W, BOX_H, entry=BOX_H // 2, exit=BOX_H // 2)
    block.shapes.append(("more", {"x": 0, "y": 0, "count": count}))
    return [block]


def _empty() -> Block:
    """The blank drawn for a chain or group with nothing in it."""
    return Block(BOX_W, BOX_H // 2, entry=BOX_H // 4, exit=BOX_H // 4)


def _row(blocks: List[Block]) -> Block:
    """Blocks left to right, their entries on one line, each arrow to the next."""
    blocks = blocks or [_empty()]  # an empty chain (a plan minitask did not write)
    above = max(block.entry for block in blocks)
    below = max(block.height - block.entry for block in blocks)
    row = Block(sum(block.width for block in blocks) + GAP_X * (len(blocks) - 1),
                above + below, entry=above)
    x = 0
    for index, block in enumerate(blocks):
        top = above - block.entry
        block.place(row, x, top)
        if index:
            row.shapes.append(("arrow", {"x1": x - GAP_X, "y1": row.exit, "x2": x,
                                         "y2": top + block.entry}))
        row.exit = top + block.exit
        x += block.width + GAP_X
    return row


def _stack(members: List[Dict[str, Any]], more: int, label: str) -> Block:
    """A group's members one above the other, inside a frame: a line from its entry
    to each member, and from each member to its exit."""
    blocks = [layout(member) for member in members[:MEMBERS_DRAWN]]
    blocks += _more(more + max(0, len(members) - MEMBERS_DRAWN))
    if not blocks:
        blocks = [_empty()]
    inner = max(block.width for block in blocks)
    height = sum(block.height for block in blocks) + GAP_Y * (len(blocks) - 1) + 2 * PAD
    stack = Block(inner + 2 * PAD, height, entry=height // 2, exit=height // 2)
    stack.shapes.append(("frame", {"x": 0, "y": 0, "width": stack.width, "height": height,
                                   "label": label}))
    y = PAD
    for block in blocks:
        left = PAD + (inner - block.width) // 2
        block.place(stack, left, y)
        stack.shapes.append(("line", {"x1": 0, "y1": stack.entry, "x2": left,
                                      "y2": y + block.entry}))
        stack.shapes.append(("line", {"x1": left + block.width, "y1": y + block.exit,
                                      "x2": stack.width, "y2": stack.exit}))
        y += block.height + GAP_Y
    return stack


def svg(block: Block, margin: int = 10) -> str:
    """The SVG of a laid-out graph, every value in it escaped (the page inserts it as
    markup: ``|safe``)."""
    width, height = block.width + 2 * margin, block.height + 2 * margin + 22
    parts = [_tag('<svg xmlns="http://www.w3.org/2000/svg" id="workflow-graph" width="{}" '
                  'height="{}" viewBox="0 0 {} {}" role="img"><defs><marker id="arrow" '
                  'viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
                  'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#78909c"/></marker>'
                  '</defs><g transform="translate({},{})">',
                  width, height, width, height, margin, margin + 22)]
    # frames first: lines and boxes are drawn over them
    shapes = sorted(block.shapes, key=lambda shape: shape[0] != "frame")
    parts += [_shape(kind, spec) for kind, spec in shapes]
    parts.append("</g></svg>")
    return "".join(parts)


def _shape(kind: str, spec: Dict[str, Any]) -> str:
    if kind == "frame":
        return _tag('<rect x="{}" y="{}" width="{}" height="{}" rx="8" fill="none" '
                    'stroke="#b0bec5" stroke-dasharray="4 3"/><text x="{}" y="{}" '
                    'font-size="11" fill="#607d8b">{}</text>',
                    spec["x"], spec["y"], spec["width"], spec["height"], spec["x"] + 6,
                    spec["y"] - 5, _short(spec["label"], 40))
    if kind == "dashed":
        return _tag('<line class="on-error" x1="{}" y1="{}" x2="{}" y2="{}" '
                    'stroke="#c62828" stroke-dasharray="3 3"/>',
                    spec["x1"], spec["y1"], spec["x2"], spec["y2"])
    if kind in ("line", "arrow"):
        marker = ' marker-end="url(#arrow)"' if kind == "arrow" else ""
        return _tag('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#78909c"' + marker + '/>',
                    spec["x1"], spec["y1"], spec["x2"], spec["y2"])
    x, y = spec["x"], spec["y"]
    if kind == "more":
        fill, stroke = COLORS["more"]
        return _tag('<g class="more"><rect x="{}" y="{}" width="{}" height="{}" rx="6" '
                    'fill="{}" stroke="{}" stroke-dasharray="5 3"/><text x="{}" y="{}" '
                    'font-size="13" text-anchor="middle">+{} more</text></g>',
                    x, y, BOX_W, BOX_H, fill, stroke, x + BOX_W // 2, y + BOX_H // 2 + 5,
                    spec["count"])
    task = spec["task"]
    state = task.get("state", "pending")
    fill, stroke = COLORS.get(state, COLORS["pending"])
    errback = kind == "errback"
    label = ('<text x="{}" y="{}" font-size="11" font-style="italic" fill="#c62828">'
             'on error</text>' if errback else '')
    return _tag('<a href="/task/{}" class="{} state-{}" data-id="{}" data-state="{}">'
                '<title>{}{} {}</title>' + label + '<rect x="{}" y="{}" width="{}" '
                'height="{}" rx="6" fill="{}" stroke="{}" stroke-width="1.5"'
                + (' stroke-dasharray="6 3"' if errback else '') + '/><text x="{}" y="{}" '
                'font-size="12" font-weight="600">{}</text><text x="{}" y="{}" '
                'font-size="11" fill="#455a64">{} · <tspan class="state">{}</tspan></text>'
                '</a>',
                quote(task["id"], safe=""), kind if errback else "step", state, task["id"],
                state, "on error: " if errback else "", task["task"], task["id"],
                *((x, y - 4) if errback else ()), x, y, BOX_W, BOX_H, fill,
                stroke, x + 8, y + 18, _short(task["task"], 22), x + 8, y + 36,
                _short(task["id"], 10), state)


def _tag(markup: str, *values: Any) -> str:
    """``markup`` with each ``{}`` filled by a value, escaped (quotes too)."""
    return markup.format(*(escape(printable(str(value)), quote=True) for value in values))


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def page(app: Minitask, environ: Dict[str, Any],
         query: Dict[str, List[str]]) -> Tuple[str, Dict[str, Any]]:
    """``/workflow/<id>`` and ``/api/workflow/<id>``: the workflow (admin/workflows.py)
    and, for the page, its graph; ``found`` False when no plan of that id exists."""
    workflow_id = (query.get("id") or [""])[0].strip()
    found, problem = _read(app, workflow_id)
    data: Dict[str, Any] = {"workflow_id": workflow_id, "found": found is not None,
                            "workflow": found}
    if problem:
        data["problem"] = problem
    as_json = environ.get("PATH_INFO", "").lstrip("/").startswith("api/")
    if found is not None and not as_json:
        said = summary(found)
        data["headline"] = said[:1].upper() + said[1:]
        data["svg"] = svg(layout(_within_drawing(found["root"], [NODES_DRAWN])))
        data["colors"] = {state: COLORS[state] for state in STATES}
    return "workflow.html", data


def _read(app: Minitask, workflow_id: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """The workflow, or None and why: a plan record minitask did not write is data
    to fix or delete (named in the page), not an outage."""
    if not workflow_id:
        return None, ""
    try:
        return workflow(app, workflow_id), ""
    except DecodeError as exc:
        return None, str(exc)


def _within_drawing(node: Dict[str, Any], budget: List[int]) -> Dict[str, Any]:
    """A copy of a plan tree with at most ``budget[0]`` nodes, in the order they are
    drawn; the steps and members past it counted in their list's ``more``."""
    budget[0] -= 1
    lists = {"chain": "steps", "group": "members", "chord": "header"}
    if node["kind"] not in lists:
        return node
    name = lists[node["kind"]]
    kept = []
    for part in node[name]:
        if budget[0] <= 0:
            break
        kept.append(_within_drawing(part, budget))
    copy = {**node, name: kept, "more": node["more"] + len(node[name]) - len(kept)}
    if node["kind"] == "chord":  # a chord is drawn with its body: one node past at most
        budget[0] = max(budget[0], 1)
        copy["body"] = _within_drawing(node["body"], budget)
    return copy
