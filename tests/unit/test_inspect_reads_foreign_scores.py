"""``inspect`` (and the dashboard's task page, which reads the same record) answers for
a task whose delayed or lease score is no time minitask writes (inf, 1.5): the time
is left out, never a traceback."""
from __future__ import annotations

from typing import Callable

import pytest
import redis

from minitask import Minitask
from minitask.admin import inspect
from minitask.admin.activity import running
from minitask.broker.keys import AppKeys, queue_keys
from minitask.wire.message import MAX_SECONDS
from tests.support.clock import ManualClock


@pytest.mark.parametrize("score", [float("inf"), 1.5, 1e300])
def test_a_score_no_minitask_wrote_is_left_out(
        app: Minitask, fake_redis: "redis.Redis[bytes]", score: float) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    handle = add.apply_in(60, 1, 2)
    keys = queue_keys(app.name, "default")
    fake_redis.zadd(keys.delayed, {handle.id: score})
    fake_redis.zadd(keys.leases, {"leased-for-ever": score})
    info = inspect(app, handle.id)
    assert info is not None and info.due_at is None and info.name == add.name
    record = app.broker.admin.record("default", "leased-for-ever")
    assert record.lease_deadline_ms is None


class TickingClock(ManualClock):
    """A clock one millisecond later at every read, as a busy machine's may be."""

    def now_ms(self) -> int:
        self.ms += 1
        return self.ms


def test_every_lease_of_a_listing_is_judged_by_one_reading_of_the_clock(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """Leases whose deadlines are alike get one verdict, however many rows: the clock
    is read once per listing, not once per row."""
    clock = TickingClock()
    app = make_app("shop", clock=clock)
    leases = queue_keys(app.name, "default").leases
    redis_client.sadd(AppKeys(app.name).queues, "default")
    # just past the longest lease at the listing's start: too far, each of them
    deadline = clock.ms + MAX_SECONDS * 1000 + 3
    # a lease's score is its deadline in ms times ten, plus a digit
    redis_client.zadd(leases, {f"leased-{n}": deadline * 10 for n in range(10)})
    reads = clock.ms
    listed = running(app, ["default"], limit=10).tasks
    assert len(listed) == 10 and all(leases in task.unreadable for task in listed)
    assert clock.ms - reads == 1
