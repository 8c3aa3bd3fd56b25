"""Members of the worker registry longer than a worker's name can be (planted: no
minitask writes one) are removed on the server and never sent: 4 of 50 MB made
``minitask status``, the dashboard's home and ``/metrics`` 0.7-1 s each, 800 MB read.
The workers beside them are still listed."""
from __future__ import annotations

import time

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
KEYS = AppKeys("foreign")
BIG = 5_000_000
#: What one status and three pages may make Redis send, in all.
MOST_SENT = 1_000_000


def test_huge_members_of_the_worker_registry_are_never_sent_whole(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    now_ms = int(time.time() * 1000)
    admin.zadd(KEYS.workers, {"goodworker": now_ms, "aheadworker": now_ms + 3_600_000})
    for name in ("goodworker", "aheadworker"):
        admin.hset(KEYS.worker(name), mapping={"name": name, "beat_ms": now_ms})
    admin.zadd(KEYS.workers, {b"A" * BIG: now_ms, b"B" * BIG: now_ms,
                              b"C" * BIG: now_ms + 3_600_000, b"D" * BIG: float("inf")})
    before = int(admin.info("stats")["total_net_output_bytes"])
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "goodworker" in said and "aheadworker" in said, said
    dashboard = Dashboard(app)
    for path in ("/", "/workers", "/metrics"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
    assert "goodworker" in get(dashboard, "/workers")[1]
    sent = int(admin.info("stats")["total_net_output_bytes"]) - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    assert admin.zcard(KEYS.workers) == 2  # removed unsent by the first read (workers_page.lua)
    assert any(f"a member of {BIG:,} bytes" in record.getMessage()
               and KEYS.workers in record.getMessage() for record in caplog.records)
