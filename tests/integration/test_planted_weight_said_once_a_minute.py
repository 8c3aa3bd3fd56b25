"""A group weight that is not minitask's (planted in groups_weight) is said in Redis's
log at most once a minute per group, with how many calls met it since the last line.
Before, it was said once a script call: every fetch of the group, a line each."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

KEYS = QueueKeys("weights", "default")


def _lines(log: Path) -> List[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if "ignored the weight" in line]


def test_a_planted_weight_is_said_once_a_minute_per_group_with_the_calls_since(
        start_redis: Callable[..., RedisServer], tmp_path: Path) -> None:
    log = tmp_path / "redis.log"
    server = start_redis("--logfile", str(log), "--loglevel", "warning")
    client = server.client()
    clock = ManualClock()
    app = Minitask("weights", broker=client, clock=clock)
    try:
        @app.task(group_by="tenant", name="job")
        def job(tenant: str, n: int) -> int:
            return n

        client.hset(KEYS.groups_weight, mapping={"A": "1.5", "B": "inf"})
        job.delay_many([(tenant, n) for n in range(40) for tenant in ("A", "B")])

        def fetch(times: int) -> None:
            for _ in range(times):
                found = app.broker.queues.fetch("default", now_ms=clock.now_ms(),
                                                lease_ms=600_000, count=2, max_deliveries=5)
                assert len(found.deliveries) == 2
                clock.advance(1)

        fetch(30)  # 30 calls within a minute, each meeting both weights
        lines = _lines(log)
        assert len(lines) == 2, lines  # one a group
        assert any("1.5 of group A" in line for line in lines)
        assert any("inf of group B" in line for line in lines)
        assert all("0 more call(s) met it since the last line" in line for line in lines)
        clock.advance(60)
        fetch(1)
        lines = _lines(log)[2:]
        assert len(lines) == 2, lines  # a minute on: said again, with the calls since
        assert all("29 more call(s) met it since the last line" in line for line in lines)
        assert client.pttl(KEYS.groups_weight) == -1  # the weights are left as they are
        assert 0 < client.pttl(KEYS.base + "flow:groups_weight_said") <= 3_600_000
    finally:
        app.close()
        client.close()
