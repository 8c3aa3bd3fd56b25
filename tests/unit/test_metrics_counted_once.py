"""A worker's counts are added to the app's metrics once: a key no minitask wrote (the
metrics hash, or a minute's throughput, of another type) is moved aside whole and the
counts added to a new one, never dropped for good (they were, heartbeat after heartbeat,
while the planted key stayed: /metrics lost its series); a field that holds no number
refuses only its own count, said, while the rest stand; nothing is added twice."""
from __future__ import annotations

import logging

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.stores.metrics import MINUTE_MS, Delta


def heartbeat(app: Minitask, minute: int) -> None:
    """One heartbeat's counts: one worker's five successes."""
    delta = Delta()
    delta.counts[("tasks", "q", "t", "succeeded")] += 5
    delta.minutes[(minute, "q")] += 5
    app.broker.metrics.add(delta)


@pytest.mark.parametrize("planted", ["metrics", "throughput"])
def test_a_planted_key_is_moved_aside_and_no_count_is_lost_or_doubled(
        app: Minitask, fake_redis: "redis.Redis[bytes]", planted: str,
        caplog: pytest.LogCaptureFixture) -> None:
    keys = AppKeys(app.name)
    minute = app.clock.now_ms() // MINUTE_MS
    key = keys.metrics if planted == "metrics" else keys.throughput(minute)
    fake_redis.set(key, b"oops")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            heartbeat(app, minute)
    assert app.broker.metrics.totals()[("tasks", "q", "t", "succeeded")] == 15
    assert int(fake_redis.hget(keys.throughput(minute), "q") or 0) == 15
    assert fake_redis.get(f"{key}:foreign") == b"oops"  # kept whole for its owner
    said = [record.getMessage() for record in caplog.records
            if f"moved aside to {key}:foreign" in record.getMessage()]
    assert len(said) == 1, caplog.text


def test_a_field_with_no_number_refuses_only_its_own_count(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    keys = AppKeys(app.name)
    minute = app.clock.now_ms() // MINUTE_MS
    fake_redis.hset(keys.metrics, "tasks\x1fq\x1ft\x1fsucceeded", "many")
    for _ in range(3):
        heartbeat(app, minute)
        delta = Delta()
        delta.counts[("tasks", "q", "t", "failed")] += 1
        app.broker.metrics.add(delta)
    assert fake_redis.hget(keys.metrics, "tasks\x1fq\x1ft\x1fsucceeded") == b"many"
    assert app.broker.metrics.totals()[("tasks", "q", "t", "failed")] == 3
    assert int(fake_redis.hget(keys.throughput(minute), "q") or 0) == 15
