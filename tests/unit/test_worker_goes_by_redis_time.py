"""A worker's app clock reads Redis's time: measured as it starts, again when the
period is over or the machine's clock jumps (at a heartbeat, before leases are
renewed), said when it goes far from Redis's or comes back; a test's own clock is
left alone."""
from __future__ import annotations

import logging
import time
from typing import Any, List

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.testing import TestClock
from minitask.wire.message import SystemClock
from minitask.worker import redis_time
from minitask.worker.redis_time import JUMP_MS, RedisTime

HOUR_MS = 3_600_000


def redis_behind(client: Any, monkeypatch: pytest.MonkeyPatch, ms: List[int]) -> None:
    """Redis's clock ``ms[0]`` behind this machine's (changed by the test as it goes)."""
    def redis_time_now() -> Any:
        now_us = round(time.time() * 1_000_000) - ms[0] * 1000
        return now_us // 1_000_000, now_us % 1_000_000

    monkeypatch.setattr(client, "time", redis_time_now)


def test_the_app_clock_reads_redis_time_once_a_worker_measured_it(
        fake_redis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = Minitask("clocks", broker=fake_redis)
    behind = [HOUR_MS]
    redis_behind(app.broker.client, monkeypatch, behind)
    worker = app.worker(burst=True)
    worker.run()
    assert isinstance(app.clock, SystemClock)
    assert abs(worker.clock_skew_ms - HOUR_MS) < 1000  # type: ignore[operator]
    # everything the app writes now is on Redis's clock, an hour behind this machine's
    assert abs(app.clock.now_ms() - (time.time() * 1000 - HOUR_MS)) < 1000
    handle = app.task(name="noop")(lambda: None).apply_async(delay=60)
    due = app.broker.client.zscore(queue_keys("clocks", "default").delayed, handle.id)
    assert due is not None and abs(due / 10 - (time.time() * 1000 - HOUR_MS + 60_000)) < 2000


def test_it_is_measured_again_when_the_period_ends_or_the_clock_jumps(
        fake_redis: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    app = Minitask("clocks", broker=fake_redis)
    behind = [0]
    redis_behind(app.broker.client, monkeypatch, behind)
    worker = app.worker()
    redis_time.start_clock(worker)
    assert worker.redis_time.measured and not worker.redis_time.due()

    # the machine's clock steps an hour ahead: seen at the next heartbeat, said once
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + HOUR_MS / 1000)
    behind[0] = HOUR_MS
    assert worker.redis_time.due()
    with caplog.at_level(logging.INFO, logger="minitask.worker.redis_time"):
        worker.beat()
        worker.beat()
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and "this worker's clock is 3600.0 s ahead" in said[0]
    assert "it goes by Redis's time instead" in said[0]
    assert abs(app.clock.offset_ms - HOUR_MS) < 1000  # type: ignore[attr-defined]

    # back in step: measured again once the period is over, and said
    monkeypatch.setattr(time, "time", wall)
    behind[0] = 0
    caplog.clear()
    worker.redis_time._next = 0.0  # the period is over
    with caplog.at_level(logging.INFO, logger="minitask.worker.redis_time"):
        worker.beat()
    assert abs(app.clock.offset_ms) < 1000  # type: ignore[attr-defined]
    assert [record.getMessage() for record in caplog.records] == [
        "this worker's clock is within 2.0 s of Redis's again"]
    worker.forget()


def test_a_small_step_waits_for_the_period_and_redis_away_keeps_the_offset(
        fake_redis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SystemClock()
    times = RedisTime()
    assert times.measure(clock, fake_redis) is not None and not times.due()
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + JUMP_MS / 2000)
    assert not times.due()
    monkeypatch.setattr(time, "time", lambda: wall() + JUMP_MS / 500)
    assert times.due()
    clock.go_by_redis(1234)

    def refused() -> Any:
        import redis
        raise redis.ConnectionError("gone")

    monkeypatch.setattr(fake_redis, "time", refused)
    assert times.measure(clock, fake_redis) is None
    assert clock.offset_ms == 1234 and times.due()  # the jump is still to measure


def test_a_test_clock_is_left_alone(fake_redis: Any) -> None:
    clock = TestClock(now_ms=5_000)
    app = Minitask("clocks", broker=fake_redis, clock=clock)
    worker = app.worker(burst=True)
    worker.run()
    assert worker.clock_skew_ms is None and clock.now_ms() == 5_000
    assert not worker.redis_time.measured
