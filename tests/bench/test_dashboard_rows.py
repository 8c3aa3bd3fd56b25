"""The bench's idle dashboard rows run end to end on a short window and leave no key
behind; no timing is asserted (the figures are the bench's to report)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.dashboard import measure_idle_dashboard
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_an_idle_dashboard_with_one_tab_states_its_redis_calls_and_cpu_per_minute(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    rows = measure_idle_dashboard(redis_server.url, seconds=3.0)
    assert [row["metric"] for row in rows] == [
        "idle dashboard, one open tab: Redis commands/min",
        "idle dashboard, one open tab: Redis CPU/min"]
    calls, cpu = rows
    # a poll reads Redis (a tab polls twice a second), and Redis spent time on it
    assert calls["value"] > 60 and cpu["value"] > 0
    assert "every 500 ms, 2 queues" in calls["detail"] and "per poll" in cpu["detail"]
    assert not list(admin.scan_iter(match="minitask:{minitask-bench*"))
