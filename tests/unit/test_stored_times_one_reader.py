"""Every time minitask reads back from Redis goes through one reader,
``stores.foreign.time_in``: ``testing.drain``'s next due time, ``inspect``'s due times
and lease deadlines and a workflow's start time agree on what is a time. The schedule
read (``next_due_ms``) used to take a score of 0 or 9 for a task due in 1970 (and
drain then waited on it), where inspect called the same score unreadable."""
from __future__ import annotations

from typing import Callable, Optional

import pytest
import redis

from minitask import Minitask
from minitask.admin.workflows import workflow
from minitask.broker.keys import queue_keys
from minitask.stores.foreign import EARLIEST_MS
from minitask.wire.message import MAX_MS
from minitask.wire.serializer import pack_data

#: (a score of the delayed set, the due time it is read as: None for no time).
SCORES = [
    (0, None),                                   # once read as 1970-01-01
    (9, None),                                   # the same, with a priority digit
    (EARLIEST_MS * 10 - 1, None),                # 1999-12-31 23:59:59.999, priority 9
    (EARLIEST_MS * 10, EARLIEST_MS),             # the earliest time minitask writes
    (1_800_000_000_000 * 10 + 7, 1_800_000_000_000),
    (MAX_MS * 10 + 9, MAX_MS),                   # the year 9999's last ms
    (MAX_MS * 10 + 10, None),
    (1.5, None),
    (18_000_000_000_000.5, None),                # fractional, in range
    (float("inf"), None),
    (-10, None),
]


@pytest.mark.parametrize("score, read", SCORES)
def test_the_schedule_and_inspect_read_a_due_time_alike(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        score: float, read: Optional[int]) -> None:
    app = make_app("times")
    keys = queue_keys("times", "default")
    redis_client.zadd(keys.delayed, {"planted": score})
    _, peeked = app.broker.admin.peek("default", "delayed", 1)
    assert [task.at_ms for task in peeked] == [read]
    assert app.broker.admin.record("default", "planted").due_ms == read
    assert app.broker.admin.next_due_ms("default") == read
    app.close()


def test_the_next_due_time_passes_over_scores_that_are_no_time(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """Planted scores sort before (0, 9) and among (a fractional one) real due times:
    the first real one is the schedule's next, as drain needs it."""
    app = make_app("times")

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    handle = add.apply_in(60, 1, 2)
    due_ms = app.clock.now_ms() + 60_000
    keys = queue_keys("times", "default")
    redis_client.zadd(keys.delayed, {"zero": 0, "nine": 9,
                                     "half": (app.clock.now_ms() + 1_000) * 10 + 0.5})
    assert app.broker.admin.next_due_ms("default") == due_ms
    assert app.broker.admin.record("default", handle.id).due_ms == due_ms
    app.close()


@pytest.mark.parametrize("at, started", [
    (0, None), (EARLIEST_MS - 1, None), (1.5, None), ("soon", None), (MAX_MS + 1, None),
    (EARLIEST_MS, "2000-01-01T00:00:00+00:00"),
    (1_800_000_000_000, "2027-01-15T08:00:00+00:00"),
])
def test_a_workflows_start_time_is_read_as_a_due_time_is(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        at: object, started: Optional[str]) -> None:
    app = make_app("times")

    @app.task(name="times.tsum")
    def tsum(values: list) -> int:  # type: ignore[type-arg]
        return sum(values)

    key = app.broker.workflows.keys("default").workflow("w1")
    redis_client.set(key, pack_data({"v": 1, "id": "w1", "at": at, "n": ["times.tsum"],
                                     "q": ["default"], "root": ["t", "x", 0, 0]}, "a plan"))
    found = workflow(app, "w1")
    assert found is not None and found["started_at"] == started
    app.close()
