"""A plan record is refused for its true reason (probe 9, L2): a ttl out of range is
said to be one, not "name tables are not lists of text"; a task or group id longer
than any minitask writes is refused (a 60,000-character id made a 736 kB page), and
the page and the CLI show the plan unreadable with why. A result ttl an option may
name (a month) is read, and a workflow step's chosen id that a record could not
hold is refused when sent."""
from __future__ import annotations

import html
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask, chain
from minitask.admin.workflows import workflow
from minitask.dashboard.web import Dashboard
from minitask.errors import ConfigurationError, DecodeError
from minitask.stores.plans import MAX_TTL_MS, tree
from minitask.wire.message import MAX_ID_BYTES
from minitask.wire.serializer import pack_data
from tests.unit.test_dashboard import call


def record(root: Any, **fields: Any) -> Dict[str, Any]:
    return {"v": 2, "id": "w", "at": 0, "n": ["shop.tsum"], "q": ["default"],
            "l": [1000], "root": root, "s": 1, **fields}


def task(task_id: str) -> List[Any]:
    return ["t", task_id, 0, 0, [[], 0]]


@pytest.mark.parametrize("ttls", [[10 ** 18], [-1], [1.5], ["1000"], [MAX_TTL_MS + 1]])
def test_a_ttl_out_of_range_is_refused_as_such(ttls: List[Any]) -> None:
    with pytest.raises(DecodeError) as raised:
        tree(record(task("a"), l=ttls))
    said = str(raised.value)
    assert "its ttl table holds" in said and "no result ttl minitask writes" in said
    assert "name tables" not in said


@pytest.mark.parametrize("ttls", [[], [1, 2], "x"])
def test_a_ttl_table_of_the_wrong_shape_is_refused_as_such(ttls: Any) -> None:
    with pytest.raises(DecodeError, match="its ttl table is not a list of one result ttl "
                                          "per task name"):
        tree(record(task("a"), l=ttls))


def test_name_tables_that_are_not_text_are_still_refused_as_such() -> None:
    with pytest.raises(DecodeError, match="its name tables are not lists of text"):
        tree(record(task("a"), n=[1]))


def test_a_ttl_of_a_month_is_read() -> None:
    month = 30 * 86_400_000  # above the 10**9 a count may be
    assert tree(record(task("a"), l=[month]))["ttl"] == month


@pytest.mark.parametrize("root", [
    task("x" * (MAX_ID_BYTES + 1)),
    ["g", "g" * 60_000, [task("a")], 0, [[], 0]],
    ["h", "\u00e9" * (MAX_ID_BYTES // 2 + 1), [task("a")], 0, task("b"), [[], 0]],
])
def test_an_id_longer_than_any_minitask_writes_is_refused_naming_its_length(
        root: Any) -> None:
    with pytest.raises(DecodeError) as raised:
        tree(record(root))
    said = str(raised.value)
    assert f"is longer than any minitask writes (at most {MAX_ID_BYTES})" in said
    assert len(said) < 300


def test_an_id_of_the_longest_length_is_read() -> None:
    assert tree(record(task("x" * MAX_ID_BYTES)))["id"] == "x" * MAX_ID_BYTES


def _app(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Any]:
    app = make_app("shop")

    @app.task(name="shop.tsum")
    def tsum(values: List[int]) -> int:
        return sum(values)

    return app, tsum


def test_a_plan_with_a_huge_id_is_shown_unreadable_with_the_reason(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, _ = _app(make_app)
    key = app.broker.workflows.keys("default").workflow("big")
    redis_client.set(key, pack_data(record(["c", [task("i" * 60_000)] * 4, 0, [[], 0]]),
                                    "a plan"))
    with pytest.raises(DecodeError) as raised:
        workflow(app, "big")
    assert key in str(raised.value) and "60,000 bytes" in str(raised.value)
    status, _, body = call(Dashboard(app), "/workflow/big")
    assert status == "200 OK" and 'id="unreadable"' in body
    assert "60,000 bytes" in html.unescape(body) and len(body) < 20_000
    status, _, body = call(Dashboard(app), "/api/workflow/big")
    assert status == "200 OK" and '"found": false' in body and len(body) < 5_000


def test_a_step_id_a_plan_could_not_hold_is_refused_when_sent(
        make_app: Callable[..., Minitask]) -> None:
    app, tsum = _app(make_app)
    # refused as the signature is made (options.check_task_id), before any plan
    with pytest.raises(ConfigurationError, match=f"longer than {MAX_ID_BYTES}"):
        chain(tsum.s([1]).set(task_id="s" * (MAX_ID_BYTES + 1)), tsum.s()).delay()
    handle = chain(tsum.s([1]).set(task_id="s" * MAX_ID_BYTES), tsum.s()).delay()
    assert workflow(app, handle.id) is not None
