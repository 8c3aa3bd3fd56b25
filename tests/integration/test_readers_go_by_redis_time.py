"""Workers write heartbeats on Redis's clock (worker/redis_time.py); every reader
judges their ages on it too: one whose clock ran an hour ahead (the dashboard,
``/metrics``, ``minitask shutdown``, a ``get()`` timeout's message) found no live
worker, and its listing pruned the live records from the registry."""
from __future__ import annotations

import time
from typing import Iterator

import pytest

from minitask import Minitask
from minitask.admin import live_workers
from minitask.broker.keys import AppKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

HOUR_S = 3600
KEYS = AppKeys("readers")


@pytest.fixture
def app(redis_server: RedisServer) -> Iterator[Minitask]:
    client = redis_server.client()
    client.flushall()
    now_ms = int(time.time() * 1000)  # this machine's clock is Redis's, so far
    client.zadd(KEYS.workers, {"w1": now_ms})
    client.hset(KEYS.worker("w1"), mapping={"beat_ms": now_ms, "name": "w1", "host": "h1",
                                            "pid": 7, "queues": "default"})
    client.close()
    made = Minitask("readers", broker=redis_server.url)
    yield made
    made.close()


def test_a_reader_an_hour_ahead_still_finds_the_live_worker_and_prunes_none(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    wall, wall_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: wall() + HOUR_S)
    monkeypatch.setattr(time, "time_ns", lambda: wall_ns() + HOUR_S * 1_000_000_000)
    assert [worker["name"] for worker in live_workers(app)] == ["w1"]
    assert app.broker.client.zcard(KEYS.workers) == 1
