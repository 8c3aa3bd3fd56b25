"""The bench's fair-queue rows run end to end and leave no key behind (no timing
asserted: the figures are the bench's to report)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.capacity import Capacity
from minitask.bench.fair import measure_fair
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_fair_bench_counts_a_small_groups_wait_and_prices_grouped_drains(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    capacity = Capacity()
    rows = measure_fair(redis_server.url, drain_rounds=1, capacity=capacity)
    assert [row["metric"] for row in rows] == [
        "group B's task behind group A's 5,000 ready: fetches",
        "drain of 5,000 grouped (groups of one) vs ungrouped",
        "drain of 5,000 grouped (one group) vs ungrouped"]
    # the fairness the row prices: B's task among the first few fetches, not the 5,001st
    assert rows[0]["value"] <= 3, rows[0]
    assert all(row["value"] > 0 for row in rows)
    assert "tasks/s" in rows[1]["detail"] and "ungrouped" in rows[2]["detail"]
    assert [entry["case"] for entry in capacity.entries] == [
        "fair queues: grouped, groups of one", "fair queues: grouped, one group"]
    assert not list(admin.scan_iter(match="minitask:{minitask-bench-fair*"))
