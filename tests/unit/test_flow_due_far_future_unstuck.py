"""A limiter whose due time no minitask wrote (a century ahead) no longer parks its
tasks for years: the worker's heartbeat makes it due now, said once, and the limit
itself still holds."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.clock import ManualClock
from tests.support.draining import drain

CENTURY_MS = 100 * 365 * 24 * 3_600_000


def test_a_limiter_due_a_century_ahead_is_made_due_and_its_task_runs(
        app: Minitask, clock: ManualClock, fake_redis: "redis.Redis[bytes]") -> None:
    ran = []

    @app.task(rate_limit="1/h")
    def hourly(n: int) -> None:
        ran.append(n)

    hourly.delay(1)
    hourly.delay(2)
    assert drain(app.worker(burst=True)) == 1 and ran == [1]  # the second is parked
    due = queue_keys(app.name, "default").flow_due
    (limiter, legit), = fake_redis.zrange(due, 0, -1, withscores=True)
    assert legit <= clock.now_ms() + 3_601_000  # within the hour's window, and then some
    fake_redis.zadd(due, {limiter: clock.now_ms() + CENTURY_MS})  # no minitask wrote this
    app.worker(burst=True).beat()
    assert fake_redis.zscore(due, limiter) == clock.now_ms()
    clock.advance(3601.0)
    drain(app.worker(burst=True))
    assert ran == [1, 2]


def test_a_due_set_of_another_type_is_named_at_the_heartbeat(
        app: Minitask, fake_redis: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    """Its limited tasks could not come due: the worker moves it aside (issue 29),
    saying so and naming the key, and makes the parked limiters due again."""
    import logging
    due = queue_keys(app.name, "default").flow_due
    fake_redis.set(due, b"x")
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        app.worker(burst=True).beat()
    assert any(due in record.getMessage() and f"moved aside to {due}:foreign"
               in record.getMessage() for record in caplog.records)
    assert fake_redis.get(due + ":foreign") == b"x"
