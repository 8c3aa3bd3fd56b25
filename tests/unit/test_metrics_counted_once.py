"""A worker's counts are added to the app's metrics once: a key no minitask wrote (a
minute's throughput of another type) refuses only its own commands, which are dropped
and said, while the rest stand, and nothing is added again at the next heartbeat."""
from __future__ import annotations

import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.stores.metrics import MINUTE_MS, Delta


def test_a_planted_throughput_key_never_makes_the_counts_grow(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    minute = app.clock.now_ms() // MINUTE_MS
    fake_redis.set(AppKeys(app.name).throughput(minute), b"oops")
    for _ in range(3):  # three heartbeats, each with one worker's five successes
        delta = Delta()
        delta.counts[("tasks", "q", "t", "succeeded")] += 5
        delta.minutes[(minute, "q")] += 5
        app.broker.metrics.add(delta)  # refused in part: nothing to keep for the next
    assert app.broker.metrics.totals()[("tasks", "q", "t", "succeeded")] == 15
    assert fake_redis.get(AppKeys(app.name).throughput(minute)) == b"oops"  # untouched
