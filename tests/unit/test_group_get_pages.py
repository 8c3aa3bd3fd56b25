"""``GroupHandle.get()`` reads its members' results a page at a time and checks its
timeout between pages (tests/integration/test_big_group_get_keeps_its_timeout.py
times it on 20,000 members); what it returns and what its timeout says are as
before: the results in member order (a nested group's in a list of its own), the
first failed member's TaskFailed, the members counted by status. On fakeredis,
with pages of 3 members, so that a handful of members spans several."""
from __future__ import annotations

import ast
from typing import Any, Dict, Tuple

import pytest

from minitask import GroupHandle, Minitask, ResultTimeout, TaskFailed, chain, group
from minitask import groups
from tests.support.draining import drain


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(groups, "PAGE", 3)


def _tasks(app: Minitask) -> Tuple[Any, Any]:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def boom(a: int) -> None:
        raise ValueError(f"boom {a}")

    return add, boom


def _counts(message: str, head: str) -> Dict[str, int]:
    """The counts a timeout's message gives after ``head``, the whole rest of it."""
    assert message.startswith(head), message
    counts = ast.literal_eval(message[len(head):])
    assert isinstance(counts, dict)
    return counts


def test_results_span_pages_in_member_order_with_nested_groups_in_their_place(
        app: Minitask) -> None:
    add, _ = _tasks(app)
    handle = group(*(add.s(index, index) for index in range(4)),
                   group(add.s(10, 10), group(add.s(20, 20)), add.s(30, 30)),
                   chain(add.s(1, 1), add.s(5)), add.s(7, 7)).delay()
    drain(app.worker(burst=True))
    assert handle.get(timeout=5) == [0, 2, 4, 6, [20, [40], 60], 7, 14]
    assert handle.get() == [0, 2, 4, 6, [20, [40], 60], 7, 14]
    assert handle.status() == {"succeeded": 7}


def test_a_done_group_of_one_page_answers_a_timeout_of_0(app: Minitask) -> None:
    add, _ = _tasks(app)
    handle = group(add.s(1, 1), group(add.s(2, 2))).delay()
    drain(app.worker(burst=True))
    assert handle.get(timeout=0) == [2, [4]]  # one look, as before


def test_the_first_failed_member_is_raised_from_a_later_page(app: Minitask) -> None:
    add, boom = _tasks(app)
    handle = group(*(add.s(index, 1) for index in range(5)), boom.s(5), add.s(6, 1),
                   boom.s(7)).delay()
    drain(app.worker(burst=True))
    with pytest.raises(TaskFailed) as raised:
        handle.get(timeout=5)
    assert raised.value.task_id == handle.handles[5].id
    assert "boom 5" in str(raised.value)


def test_a_timeout_counts_the_members_by_status_as_before(app: Minitask) -> None:
    add, _ = _tasks(app)
    handle = group(*(add.s(index, index) for index in range(7))).delay()
    head = f"group {handle.id} did not finish within 0.01 s: "
    with pytest.raises(ResultTimeout) as raised:
        handle.get(timeout=0.01)
    assert _counts(str(raised.value), head) == {"queued": 7}
    worker = app.worker(burst=True)
    assert worker.run_once() and worker.run_once()
    with pytest.raises(ResultTimeout) as raised:
        handle.get(timeout=0.01)
    assert _counts(str(raised.value), head) == {"succeeded": 2, "queued": 5}


def test_a_done_group_read_past_its_timeout_says_reading_took_the_time(
        app: Minitask) -> None:
    add, _ = _tasks(app)
    handle = group(*(add.s(index, index) for index in range(7))).delay()
    drain(app.worker(burst=True))
    with pytest.raises(ResultTimeout) as raised:
        handle.get(timeout=0)  # the first page is read; past the deadline, no other
    assert str(raised.value) == (
        f"group {handle.id} did not finish within 0 s: {{'succeeded': 7}}; reading its "
        f"results took that time (those of 3 of its 7 tasks were read)")
    assert handle.get(timeout=5) == [2 * index for index in range(7)]


def test_counts_cut_short_say_how_many_members_they_cover(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    add, _ = _tasks(app)
    monkeypatch.setattr(groups, "LOOK_GRACE", 0.0)  # the first page, then no time
    flat = group(*(add.s(index, index) for index in range(7))).delay()
    with pytest.raises(ResultTimeout) as raised:
        flat.get(timeout=0.01)
    assert str(raised.value) == (
        f"group {flat.id} did not finish within 0.01 s: {{'queued': 3}} among its first 3 "
        f"members (of 7: the others were not read in the 0.0 s given; call status() to "
        f"count them all)")
    nested = group(group(add.s(1, 1)), *(add.s(index, index) for index in range(7))).delay()
    assert isinstance(nested, GroupHandle)
    with pytest.raises(ResultTimeout, match=r"within 0\.01 s: its members' statuses were "
                                            r"not read in the 0\.0 s given; call status"):
        nested.get(timeout=0.01)
    assert flat.status() == {"queued": 7}  # status() itself counts them all
