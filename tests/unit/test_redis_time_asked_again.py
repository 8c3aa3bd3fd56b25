"""A worker whose first TIME call fails (refused by an ACL, cut by a reset) asks again
once a period: it stayed on its own clock for good, and a clock far ahead would take
other workers' leases as expired."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask.wire.message import SystemClock
from minitask.worker.redis_time import RedisTime


def test_a_time_refused_at_start_up_is_asked_again_once_a_period(
        fake_redis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    clock, times = SystemClock(), RedisTime()

    def refused() -> Any:
        raise redis.ResponseError("NOPERM this user has no permissions to run 'time'")

    monkeypatch.setattr(fake_redis, "time", refused)
    assert times.measure(clock, fake_redis) is None and not times.measured
    assert not times.due()  # not at every heartbeat: once a period
    times._next = 0.0  # the period is over
    assert times.due()
    monkeypatch.undo()
    assert times.measure(clock, fake_redis) is not None and times.measured
    assert clock.measured_at is not None
