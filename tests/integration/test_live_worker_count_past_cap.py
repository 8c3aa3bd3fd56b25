"""More live workers than a listing shows (SHOWN_WORKERS, 500) are all counted, on a
real redis-server: ``/metrics``' ``minitask_workers`` and ``minitask status``'s "N live
worker(s)" said 500 with 601 or 1,001 live workers (issue 29, probe 29c)."""
from __future__ import annotations

import re

import pytest

from minitask import Minitask
from minitask.dashboard.web import Dashboard
from minitask.stores.registry import SHOWN_WORKERS
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
LIVE = SHOWN_WORKERS + 101


def test_every_live_worker_is_counted_past_the_listings_cap(app: Minitask) -> None:
    now_ms = app.clock.now_ms()
    for index in range(LIVE):
        name = f"w{index:04d}"
        app.broker.registry.heartbeat(name, {
            "name": name, "pid": 1000 + index, "host": "h", "queues": "default",
            "pool": "thread", "concurrency": 1, "started_ms": now_ms, "processed": 0,
            "failed": 0, "running": 0, "recycled": 0, "beat_ms": now_ms,
            "running_ids": "[]"}, now_ms, ttl_ms=120_000)
    status, scrape = get(Dashboard(app), "/metrics")
    assert status.startswith("200"), status
    assert re.search(r"^minitask_workers %d\.0$" % LIVE, scrape, re.M), scrape[-2000:]
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert f"{LIVE} live worker(s)" in said, said[-2000:]
    assert "... and 101 more" in said, said[-2000:]
