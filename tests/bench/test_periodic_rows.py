"""The periodic rows of ``minitask bench`` run end to end on short windows and leave
no key behind; no timing is asserted (speed is the benchmark's business)."""
from __future__ import annotations

import pytest
import redis

from minitask.bench.periodic import PeriodicBench
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
def test_periodic_bench_reports_lateness_exactness_and_idle_cost(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    figures = PeriodicBench(redis_server.url, seconds=1.0, every=0.1, idle_seconds=5.0,
                            schedules=10).run()
    by_name = {figure.metric: figure for figure in figures}
    assert list(by_name) == [
        "periodic tick lateness p50", "periodic tick lateness p99",
        "periodic earliest start vs tick", "periodic ticks run twice or missed",
        "idle worker Redis calls/s, no schedules", "idle worker Redis calls/s, 10 schedules"]
    assert by_name["periodic ticks run twice or missed"].value == 0
    assert by_name["periodic earliest start vs tick"].value >= 0
    assert by_name["idle worker Redis calls/s, no schedules"].value > 0
    assert not list(admin.scan_iter(match="minitask*"))
