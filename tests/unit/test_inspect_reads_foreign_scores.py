"""``inspect`` (and the dashboard's task page, which reads the same record) answers for
a task whose delayed or lease score is no time minitask writes (inf, 1.5): the time
is left out, never a traceback."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.admin import inspect
from minitask.broker.keys import queue_keys


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
