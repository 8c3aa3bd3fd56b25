"""The bench's workflow rows run end to end and leave no key behind (no timing asserted)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.canvas import measure_workflows
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_workflow_bench_measures_a_chord_and_a_chain_beside_plain_tasks(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    rows = measure_workflows(redis_server.url)
    metrics = [row["metric"] for row in rows]
    assert metrics == ["chord of 1,000: delay() to body start", "chain of 100: time per step"]
    assert all(row["value"] > 0 for row in rows)
    assert "sent plainly" in rows[0]["detail"] and "plain tasks" in rows[1]["detail"]
    assert not list(admin.scan_iter(match="minitask:{minitask-bench-canvas*"))
