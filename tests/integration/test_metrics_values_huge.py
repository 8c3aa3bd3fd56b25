"""Fields of the metrics hash and the throughput series longer than minitask writes
(it writes numbers; planted) are measured first (HSTRLEN) and never read: one 20 MB
field cost every /metrics scrape 20 MB, 60 minutes of 5 MB throughput made the
dashboard's home 2 s. The counts beside them are still read."""
from __future__ import annotations

import time

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard
from minitask.stores.metrics import MINUTE_MS, SEPARATOR, fields
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
KEYS = AppKeys("foreign")
BIG = 2_000_000
#: What one status, three pages and a scrape may make Redis send, in all.
MOST_SENT = 1_000_000


def test_huge_metric_values_are_never_read(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    big, good = list(fields(["other"], ["mark"]))[:2]
    admin.hset(KEYS.metrics, mapping={big: b"9" * BIG, good: b"7"})
    now_ms = int(time.time() * 1000)
    minute = now_ms // MINUTE_MS
    for at in range(minute - 9, minute + 1):
        admin.hset(KEYS.throughput(at), mapping={"other": b"7" * BIG, "default": b"3"})
    before = int(admin.info("stats")["total_net_output_bytes"])
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    dashboard = Dashboard(app)
    for path in ("/", "/api/queues", "/metrics"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
    sent = int(admin.info("stats")["total_net_output_bytes"]) - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    totals = app.broker.metrics.totals(["other"], ["mark"])
    assert totals[tuple(good.split(SEPARATOR))] == 7
    assert tuple(big.split(SEPARATOR)) not in totals
    series = app.broker.metrics.throughput(now_ms, 10, ["default", "other"])
    assert all(counts == {"default": 3} for _, counts in series), series
    assert any("bytes long" in record.getMessage() and KEYS.metrics in record.getMessage()
               for record in caplog.records)
