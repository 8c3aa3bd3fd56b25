"""The worker registry hands out a count (``beat_ms``, ``pid``, ``processed``...) only
as the whole number a worker writes (decimal digits), else None: ``minitask status``
did ``int()`` on a planted ``beat_ms`` of "1e5" and ended in a traceback, where the
dashboard read the same field as 100000. Now both show it as unknown ("?", null)."""
from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.cli import status as status_command

from tests.support.cli import operate_with, run
from tests.unit.test_dashboard import call
from minitask.dashboard.web import Dashboard

#: What a worker never writes in a count: float forms of whole numbers, signs, spaces.
ODD = ["1e5", "12.0", "+7", " 7", "7 ", "0x10", "1_000", "١٠"]


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    return operate_with(app, monkeypatch, status_command)


@pytest.mark.parametrize("odd", ODD)
def test_a_count_a_worker_never_writes_is_unknown_never_a_traceback(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any, odd: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    now = clock.now_ms()
    fields = ("beat_ms", "pid", "processed", "failed", "running", "recycled", "concurrency",
              "started_ms", "clock_skew_ms")
    planted = {"queues": "default", **{field: odd for field in fields}}
    operated.broker.registry.heartbeat("odd-counts", planted, now, ttl_ms=60_000)
    live = operated.broker.registry.live(now, 60_000)
    assert len(live) == 1 and not set(fields) & set(live[0]), live
    code, text = run(capsys, "status", "-A", "x")
    assert code == 0 and "Traceback" not in text and "odd-counts" in text, text
    code, text = run(capsys, "status", "-A", "x", "--json")
    assert code == 0, text
    worker = json.loads(text)["workers"][0]
    assert worker["pid"] is None and worker["heartbeat_age_s"] is None
    assert worker["processed"] is None and worker["clock_skew_ms"] is None
    row = json.loads(call(Dashboard(operated), "/api/workers")[2])["workers"][0]
    assert row["pid"] is None and row["processed"] is None and row["concurrency"] is None


def test_whole_numbers_as_a_worker_writes_them_are_read(
        operated: Minitask, fake_redis: "redis.Redis[bytes]", clock: Any) -> None:
    now = clock.now_ms()
    operated.broker.registry.heartbeat(
        "w", {"queues": "default", "beat_ms": now, "pid": 42, "processed": 0,
              "clock_skew_ms": -1500, "concurrency": 4}, now, ttl_ms=60_000)
    (info,) = operated.broker.registry.live(now, 60_000)
    assert (info["beat_ms"], info["pid"], info["processed"], info["clock_skew_ms"],
            info["concurrency"]) == (str(now), "42", "0", "-1500", "4")
