"""Entries of a queue's record of recent outcomes longer than minitask writes one
(planted) are sent as their length only, never whole: 20 of 10 MB made each /recent
view and ``minitask inspect recent`` read 200 MB. The outcomes beside them are
still listed; the listing that meets one removes it (test_planted_schedule_names_bounded)."""
from __future__ import annotations

import time

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.recent import pack_entry
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
PLANTED = 10
BIG = 2_000_000
#: What one inspect and two pages may make Redis send, in all.
MOST_SENT = 1_000_000


def test_huge_recent_entries_are_never_sent_whole(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    key = queue_keys("foreign", "other").recent
    now_ms = int(time.time() * 1000)
    admin.xadd(key, {"e": pack_entry("good-early", "mark", "succeeded", now_ms, 1, 0.5,
                                     "w1", "")})
    for index in range(PLANTED):
        admin.xadd(key, {"e": b"\x99" * BIG, "x": b"y" * BIG})
    admin.xadd(key, {"e": pack_entry("good-late", "mark", "dead", now_ms, 1, 0.5, "w1",
                                     "ValueError: no")})
    before = int(admin.info("stats")["total_net_output_bytes"])
    code, said = cli("inspect", "-A", APP, "recent")
    assert code == 0, said
    assert "good-early" in said and "good-late" in said, said
    dashboard = Dashboard(app)
    for path in ("/recent", "/api/recent"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
        assert "good-early" in body and "good-late" in body
    sent = int(admin.info("stats")["total_net_output_bytes"]) - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    assert admin.xlen(key) == 2  # the planted ones removed by the first listing, the good kept
    assert any("bytes long" in record.getMessage() and key in record.getMessage()
               for record in caplog.records)
