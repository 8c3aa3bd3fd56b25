"""The bench's fan-out rows run end to end and leave no key behind (no timing asserted)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.broadcast import measure_fanout
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(400)
def test_fanout_bench_measures_throughput_and_pickup_of_ten_subscribers(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    rows = measure_fanout(redis_server.url)
    assert [row["metric"] for row in rows] == [
        "fan-out to 10 subscribers: calls/s delivered to all",
        "broadcast pickup, idle group of 10: first subscriber p50",
        "broadcast pickup, idle group of 10: every subscriber p50"]
    assert all(row["value"] > 0 for row in rows)
    assert "p99" in rows[2]["detail"]
    assert not list(admin.scan_iter(match="minitask:{minitask-bench-broadcast*"))
