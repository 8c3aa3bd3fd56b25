"""Plan records and step markers minitask did not write, read bounded (issue 29, probe
6): a record larger than any minitask writes is refused before it is unpacked, or
while it is converted, naming its key; a planted ``more`` past a sane count is
refused; an empty chain or chord header draws; an unreadable plan is a page naming
the key (not an outage); a marker's workflow id is quoted as one path segment and
bounded; a chord with an empty header gets its plan."""
from __future__ import annotations

import logging
from typing import Any, Callable, List, Tuple

import pytest
import redis

from minitask import Minitask, chord
from minitask.admin.workflows import workflow
from minitask.dashboard.web import Dashboard
from minitask.dashboard.workflow import NODES_DRAWN
from minitask.errors import DecodeError
from minitask.stores.plans import PLAN_BYTES, tree
from minitask.wire.serializer import pack_data
from tests.support.draining import drain
from tests.unit.test_dashboard import call


def _app(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Any]:
    app = make_app("shop")

    @app.task(name="shop.tsum")
    def tsum(values: List[int]) -> int:
        return sum(values)

    return app, tsum


def _plant(app: Minitask, client: "redis.Redis[bytes]", wid: str, root: Any,
           names: Any = ("shop.tsum",)) -> str:
    key = app.broker.workflows.keys("default").workflow(wid)
    client.set(key, pack_data({"v": 1, "id": wid, "at": 0, "n": list(names),
                               "q": ["default"], "root": root}, "a plan"))
    return key


def _nested(levels: int) -> Any:
    node: Any = ["t", "x", 0, 0]
    for _ in range(levels):
        node = ["g", "g", [node, node], 0]
    return node


def test_a_record_of_nested_groups_is_refused_while_read_naming_its_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    app, _ = _app(make_app)
    wid = f"exp{id(redis_client)}"  # logged once a key: one of its own for each run
    key = _plant(app, redis_client, wid, _nested(12))  # 4,096 tasks, ~50 kB packed
    with caplog.at_level(logging.WARNING), pytest.raises(DecodeError) as raised:
        workflow(app, wid)
    assert key in str(raised.value) and "larger than any minitask writes" in str(raised.value)
    assert key in caplog.text
    # a flat list longer than the packer keeps is refused as well
    with pytest.raises(DecodeError, match="at most 50 items a list"):
        tree({"v": 1, "n": ["a"], "q": ["q"], "root": ["g", "g", [["t", "x", 0, 0]] * 51, 0]})


def test_a_record_over_the_byte_bound_is_refused_before_it_is_unpacked(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, _ = _app(make_app)
    key = app.broker.workflows.keys("default").workflow("big")
    redis_client.set(key, b"\xc5" + b"\xff" * (PLAN_BYTES + 10))  # not even msgpack
    with pytest.raises(DecodeError, match=f"larger than the {PLAN_BYTES} bytes") as raised:
        workflow(app, "big")
    assert key in str(raised.value)


def test_the_page_draws_a_bounded_number_of_nodes_however_they_nest(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, _ = _app(make_app)
    # 1,621 groups, 20 on a level (as many as a group draws): within the read budgets
    leaf: Any = ["g", "g", [], 0]
    middle = ["g", "g", [leaf] * 3, 0]
    _plant(app, redis_client, "wide", ["g", "g", [["g", "g", [middle] * 20, 0]] * 20, 0])
    status, _, body = call(Dashboard(app), "/workflow/wide")
    frames = body.count('stroke-dasharray="4 3"')
    assert status == "200 OK" and 0 < frames <= NODES_DRAWN and "more</text>" in body


def test_a_planted_more_count_is_refused() -> None:
    with pytest.raises(DecodeError, match="not one minitask wrote"):
        tree({"v": 1, "n": ["a"], "q": ["q"], "root": ["c", [["t", "x", 0, 0]],
                                                       18446744073709551615]})
    assert tree({"v": 1, "n": ["a"], "q": ["q"], "root": ["c", [], 10_000]})["more"] == 10_000


@pytest.mark.parametrize("root", [["c", [], 0], ["h", "h", [], 0, ["c", [], 0]]])
def test_an_empty_chain_or_chord_header_draws(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        root: Any) -> None:
    app, _ = _app(make_app)
    _plant(app, redis_client, "empty", root)
    status, _, body = call(Dashboard(app), "/workflow/empty")
    assert status == "200 OK" and "<svg" in body


def test_an_unreadable_plan_is_a_page_naming_its_key_not_an_outage(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, _ = _app(make_app)
    key = _plant(app, redis_client, "bad", ["t", "x", 5, 0])
    status, _, body = call(Dashboard(app), "/workflow/bad")
    assert status == "200 OK" and 'id="unreadable"' in body and key in body
    status, _, body = call(Dashboard(app), "/api/workflow/bad")
    assert status == "200 OK" and key in body and '"found": false' in body


def test_a_marker_s_workflow_id_is_one_quoted_segment_and_bounded(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, tsum = _app(make_app)
    first = tsum.delay([1])
    second = tsum.delay([2])
    marker = app.broker.workflows.keys("default").once
    redis_client.hset(marker(first.id), "w", "../../api/workflow/x?y=<b>")
    redis_client.hset(marker(second.id), "w", "w" * 5_000)
    dashboard = Dashboard(app)
    _, _, body = call(dashboard, f"/task/{first.id}")
    assert 'href="/workflow/..%2F..%2Fapi%2Fworkflow%2Fx%3Fy%3D%3Cb%3E"' in body
    _, _, body = call(dashboard, f"/task/{second.id}")
    assert "w" * 300 not in body and 'id="workflow"' not in body


def test_a_chord_with_an_empty_header_gets_its_plan(
        make_app: Callable[..., Minitask]) -> None:
    app, tsum = _app(make_app)
    handle = chord([], tsum.s()).delay()
    found = workflow(app, handle.id)
    assert found is not None and found["kind"] == "chord" and found["tasks"] == 1
    drain(app.worker(["default"]))
    assert handle.get(timeout=5) == 0
    assert workflow(app, handle.id)["counts"] == {"succeeded": 1}  # type: ignore[index]
