"""A group weight above the maximum (1,000,000) planted in groups_weight (data minitask
did not write: set_group_weight refuses it) is ignored by the fetch: the group is
served at weight 1, and Redis's log says so once a call (probe L6).

The order runs on fakeredis and on the suite's own redis-server (``make_app``); the
log line is read from a redis-server of the test's own.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.fair import served, tenant_app
from tests.support.servers import RedisServer

PLANTED = "99999999999"


def test_a_planted_weight_above_the_maximum_is_served_as_weight_1(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: "redis.Redis[bytes]") -> None:
    app, job = tenant_app(make_app)
    redis_client.hset(QueueKeys("test", "default").groups_weight, "A", PLANTED)
    job.delay_many([("A", n) for n in range(5)])
    job.delay_many([("B", n) for n in range(5)])
    assert served(app, clock, 6) == ["A0", "B0", "A1", "B1", "A2", "B2"]


@pytest.mark.integration
def test_a_planted_weight_is_said_once_a_call_in_redis_log(
        start_redis: Callable[..., RedisServer], tmp_path: Path) -> None:
    log = tmp_path / "redis.log"
    server = start_redis("--logfile", str(log), "--loglevel", "warning")
    client = server.client()
    app = Minitask("weights", broker=client, clock=ManualClock())
    try:
        @app.task(group_by="tenant", name="job")
        def job(tenant: str, n: int) -> int:
            return n

        client.hset(QueueKeys("weights", "default").groups_weight, "A", PLANTED)
        job.delay_many([("A", n) for n in range(5)])
        job.delay_many([("B", n) for n in range(5)])
        found = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000,
                                        count=6, max_deliveries=5)
        assert [d.message().args for d in found.deliveries] == [
            ["A", 0], ["B", 0], ["A", 1], ["B", 1], ["A", 2], ["B", 2]]
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if "ignored the weight" in line]
        assert len(lines) == 1  # three turns of A in the fetch: said once
        assert PLANTED in lines[0] and "group A" in lines[0]
    finally:
        app.close()
        client.close()
