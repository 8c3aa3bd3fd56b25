"""The bench's flow control rows run end to end and leave no key behind (no timing
asserted: the figures are the bench's to report)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.flow import measure_flow
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_flow_bench_drains_with_limits_beside_none_and_prices_a_fetch(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    rows = measure_flow(redis_server.url, drain_rounds=1)  # the bench itself runs nine
    assert [row["metric"] for row in rows] == [
        "drain of 5,000 with limits not reached vs none",
        "Redis time per fetch of a limited task",
        "Redis time per task a fetch parks over its limit"]
    assert all(row["value"] > 0 for row in rows)
    assert "tasks/s" in rows[0]["detail"] and "without limits" in rows[1]["detail"]
    assert not list(admin.scan_iter(match="minitask:{minitask-bench-flow*"))
