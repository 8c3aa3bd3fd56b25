"""The workflow page's graph (minitask/dashboard/workflow.py) and the plan records it
is drawn from (minitask/stores/plans.py): layout, escaping, truncation, bounds, and
records minitask did not write."""
from __future__ import annotations

import re
from typing import Any, Dict, List
from xml.etree import ElementTree

import pytest

from minitask.errors import DecodeError
from minitask.stores.plans import LIST_SHOWN, TASKS_SHOWN, pack_plan, tasks_of, tree

from minitask.dashboard.workflow import MEMBERS_DRAWN, layout, svg

HOSTILE = '<script>alert("x")</script>&'


def task(task_id: str, name: str = "shop.add", queue: str = "default") -> Dict[str, Any]:
    return {"k": "t", "id": task_id, "task": name, "q": queue}


def group_of(group_id: str, members: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"k": "g", "id": group_id, "members": members}


def drawn(node: Dict[str, Any], states: Dict[str, str]) -> Dict[str, Any]:
    """A plan node packed, read back and given states, as admin/workflows.py does."""
    root = tree(pack_plan("wf", node, 0))
    for step in tasks_of(root):
        step["state"] = states.get(step["id"], "pending")
    return root


def parsed(markup: str) -> ElementTree.Element:
    return ElementTree.fromstring(markup)  # well-formed XML, or this raises


def boxes(markup: str) -> Dict[str, str]:
    """id -> state of every task box drawn."""
    return {a.get("data-id"): a.get("data-state")
            for a in parsed(markup).iter("{http://www.w3.org/2000/svg}a")}


def test_a_chord_draws_every_member_then_its_body_coloured_by_state() -> None:
    node = {"k": "h", "id": "g1", "header": [task("m1"), task("m2"), task("m3")],
            "body": task("b", "shop.total")}
    states = {"m1": "succeeded", "m2": "dead", "m3": "running"}
    markup = svg(layout(drawn(node, states)))
    assert boxes(markup) == {"m1": "succeeded", "m2": "dead", "m3": "running",
                             "b": "pending"}
    root = parsed(markup)
    links = {a.get("href") for a in root.iter("{http://www.w3.org/2000/svg}a")}
    assert links == {"/task/m1", "/task/m2", "/task/m3", "/task/b"}
    # the members are stacked (one x), the body to their right, at their middle
    xs = {a.get("data-id"): float(a.find("{http://www.w3.org/2000/svg}rect").get("x"))
          for a in root.iter("{http://www.w3.org/2000/svg}a")}
    assert xs["m1"] == xs["m2"] == xs["m3"] < xs["b"]
    assert len(re.findall(r'marker-end="url\(#arrow\)"', markup)) == 1
    assert "chord g1" in markup


def test_a_chain_runs_left_to_right_with_an_arrow_between_steps() -> None:
    node = {"k": "c", "steps": [task("a"), task("b"), task("c")]}
    block = layout(drawn(node, {}))
    xs = [spec["x"] for kind, spec in block.shapes if kind == "task"]
    assert xs == sorted(xs) and len(set(xs)) == 3
    assert sum(kind == "arrow" for kind, _ in block.shapes) == 2


def test_every_text_and_link_is_escaped() -> None:
    node = {"k": "c", "steps": [task(HOSTILE, name=HOSTILE, queue=HOSTILE),
                                group_of(HOSTILE, [task("x")])]}
    markup = svg(layout(drawn(node, {})))
    assert "<script" not in markup and "&lt;script&gt;" in markup
    root = parsed(markup)
    (first, _) = root.iter("{http://www.w3.org/2000/svg}a")
    # the link is the id percent-encoded: no quote, no tag, no second path segment
    assert first.get("href") == "/task/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%26"
    assert first.get("data-id") == HOSTILE  # read back as text, unchanged


def test_a_large_group_is_drawn_truncated_with_a_more_box() -> None:
    node = group_of("big", [task(f"t{index}") for index in range(10_000)])
    record = pack_plan("wf", node, 0)
    root = drawn(node, {})
    assert len(root["members"]) == LIST_SHOWN and root["more"] == 10_000 - LIST_SHOWN
    markup = svg(layout(root))
    assert len(boxes(markup)) == MEMBERS_DRAWN
    assert f"+{10_000 - MEMBERS_DRAWN} more" in markup
    assert len(record["n"]) == 1 and len(record["q"]) == 1  # names kept once


def test_a_plan_keeps_at_most_tasks_shown_tasks_however_nested() -> None:
    node = group_of("outer", [group_of(f"g{i}", [task(f"t{i}-{j}") for j in range(40)])
                              for i in range(40)])
    root = drawn(node, {})
    kept = tasks_of(root)
    assert TASKS_SHOWN - 1 <= len(kept) <= TASKS_SHOWN
    left_out = root["more"] + sum(member["more"] for member in root["members"])
    assert left_out > 0


@pytest.mark.parametrize("record", [
    None, [], {"v": 3}, {"v": 2}, {"v": 1, "n": ["a"], "q": ["d"], "root": ["t", "id", 3, 0]},
    {"v": 2, "n": ["a"], "q": ["d"], "l": [1], "root": ["t", "id", 0, 0]},
    {"v": 2, "n": ["a"], "q": ["d"], "l": [1], "root": ["t", "id", 0, 0, [[], -1]]},
    {"v": 2, "n": ["a"], "q": ["d"], "l": [], "root": ["t", "id", 0, 0, [[], 0]]},
    {"v": 1, "n": ["a"], "q": ["d"], "root": ["x"]},
    {"v": 1, "n": [1], "q": ["d"], "root": ["t", "id", 0, 0]},
    {"v": 1, "n": ["a"], "q": ["d"], "root": ["c", "notalist", 0]},
    {"v": 1, "n": ["a"], "q": ["d"], "root": ["g", "id", [], -1]},
])
def test_a_record_minitask_did_not_write_is_a_decode_error(record: Any) -> None:
    with pytest.raises(DecodeError, match="workflow plan record"):
        tree(record)


def errback(task_id: str, name: str = "shop.alert") -> Dict[str, Any]:
    return {"k": "t", "id": task_id, "task": name, "q": "default", "ttl": 9000, "err": []}


def test_error_callbacks_are_kept_where_declared_and_drawn_dashed_under_it() -> None:
    on_chain, on_member = errback("e1"), errback("e2", "shop.undo")
    # canvas/compiler.py gives each task the error callbacks of every part it is in
    node = {"k": "c", "steps": [
        {**task("a"), "err": [on_chain]},
        group_of("g", [{**task("m1"), "err": [on_chain, on_member]},
                       {**task("m2"), "err": [on_chain]}])]}
    root = drawn(node, {"a": "succeeded"})
    assert [err["id"] for err in root["on_error"]] == ["e1"]
    assert [err["id"] for err in root["steps"][1]["members"][0]["on_error"]] == ["e2"]
    assert root["steps"][0]["on_error"] == root["steps"][1]["on_error"] == []
    assert root["on_error"][0]["ttl"] == 9000 and root["steps"][0]["ttl"] == 0
    root["on_error"][0]["state"] = "running"
    markup = svg(layout(root))
    assert boxes(markup) == {"a": "succeeded", "m1": "pending", "m2": "pending",
                             "e1": "running", "e2": "pending"}
    errbacks = [a for a in parsed(markup).iter("{http://www.w3.org/2000/svg}a")
                if a.get("class", "").startswith("errback")]
    assert {a.get("data-id") for a in errbacks} == {"e1", "e2"}
    for box in errbacks:
        assert box.find("{http://www.w3.org/2000/svg}rect").get("stroke-dasharray")
        assert box.find("{http://www.w3.org/2000/svg}text").text == "on error"
        assert box.get("href") == f"/task/{box.get('data-id')}"
    # each hangs under what it belongs to: e2 under m1, e1 under the whole chain
    ys = {a.get("data-id"): float(a.find("{http://www.w3.org/2000/svg}rect").get("y"))
          for a in parsed(markup).iter("{http://www.w3.org/2000/svg}a")}
    assert ys["m1"] < ys["e2"] < ys["m2"] < ys["e1"]
    assert markup.count('class="on-error"') == 2


def test_error_callbacks_are_bounded_like_steps() -> None:
    many = [errback(f"e{index}") for index in range(LIST_SHOWN + 30)]
    root = drawn({"k": "c", "steps": [{**task("a"), "err": many}]}, {})
    assert len(root["on_error"]) == LIST_SHOWN and root["on_error_more"] == 30
    markup = svg(layout(root))
    assert f"+{LIST_SHOWN + 30 - MEMBERS_DRAWN} more" in markup
    assert len(boxes(markup)) == 1 + MEMBERS_DRAWN


def test_a_version_1_record_reads_without_error_callbacks() -> None:
    root = tree({"v": 1, "n": ["a"], "q": ["d"], "root": ["c", [["t", "id", 0, 0]], 0]})
    assert root["on_error"] == [] and root["steps"][0] == {
        "kind": "task", "id": "id", "task": "a", "queue": "d", "ttl": 0, "on_error": [],
        "on_error_more": 0}


def test_a_record_nested_too_deep_is_refused() -> None:
    node: Any = ["t", "id", 0, 0]
    for _ in range(200):
        node = ["c", [node], 0]
    with pytest.raises(DecodeError):
        tree({"v": 1, "n": ["a"], "q": ["d"], "root": node})


def test_a_frame_written_before_the_workflow_id_names_no_workflow() -> None:
    from pathlib import Path

    from minitask.stores.plans import workflow_id_of
    from minitask.stores.workflow_reads import frame_of
    from minitask.wire.serializer import decode_message
    golden = Path(__file__).resolve().parents[1] / "golden" / "0.1.0" / "message-workflow.bin"
    frame = frame_of(decode_message(golden.read_bytes()))
    assert frame is not None and "w" not in frame and workflow_id_of(frame) == ""
    assert workflow_id_of({"v": 1, "w": 7}) == "" and workflow_id_of({"w": "x"}) == "x"


def test_control_and_bidi_characters_are_drawn_visibly_escaped() -> None:
    """As on every page (the template's printable): a planted name cannot reorder or
    hide the text drawn around it."""
    # (a task name holding either is refused as the record is read: ids, group ids too)
    node = group_of("g\x1b[31m", [task("a\u202eb"), task("c\x1b[31md")])
    markup = svg(layout(drawn(node, {})))
    assert "\u202e" not in markup and "\x1b" not in markup
    assert "\\u202e" in markup and "\\x1b" in markup
