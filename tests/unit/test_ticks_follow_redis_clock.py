"""A clock far from Redis's never silences a schedule: a worker that measured its clock
an hour ahead arms and fires shared ticks by Redis's time, and a tick armed an hour
ahead by a clock that could not measure itself is re-armed at the schedule's next tick
by the others, running nothing."""
from __future__ import annotations

import time
from typing import Any

import fakeredis
import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys

HOUR_MS = 3_600_000


@pytest.fixture
def client() -> Any:
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def make(client: Any) -> Minitask:
    app = Minitask("clocks", broker=client)  # the machine's own clock

    @app.periodic(every=60.0, name="minutely")
    def minutely() -> None:
        pass

    return app


def armed_ms(client: Any) -> float:
    score = client.zscore(queue_keys("clocks", "default").ticks, "minutely")
    assert score is not None
    return float(score)


def test_a_worker_an_hour_ahead_arms_the_tick_by_redis_time(
        client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def redis_an_hour_behind() -> Any:
        now_us = round(time.time() * 1_000_000) - HOUR_MS * 1000
        return now_us // 1_000_000, now_us % 1_000_000

    monkeypatch.setattr(client, "time", redis_an_hour_behind)
    app = make(client)
    app.worker(burst=True).run()
    redis_now_ms = time.time() * 1000 - HOUR_MS
    assert redis_now_ms < armed_ms(client) <= redis_now_ms + 61_000


def test_a_tick_armed_an_hour_ahead_is_re_armed_at_the_next_tick_running_nothing(
        client: Any) -> None:
    app = make(client)
    app.worker(burst=True).run()  # writes the schedule and arms its next tick
    ticks = queue_keys("clocks", "default").ticks
    # what a worker whose clock runs an hour ahead arms: its next minute
    ahead_ms = (int(time.time() * 1000) + HOUR_MS) // 60_000 * 60_000 + 60_000
    client.zadd(ticks, {"minutely": ahead_ms})
    app.worker(burst=True).run()
    now_ms = time.time() * 1000
    assert now_ms < armed_ms(client) <= now_ms + 61_000
    assert app.broker.queues.counts("default")["ready"] == 0  # the re-arm ran nothing
