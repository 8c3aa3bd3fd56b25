"""A task that killed its worker max_deliveries times is told dead once (review 29b,
L1): two fetches (the slots of a process pool) that meet its expired lease at once
both report it; only the one whose bury moved it logs "dead-lettered" and tells the
task_dead hooks and metrics. On a real redis-server."""
from __future__ import annotations

import logging

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.worker.outcomes import bury_poisoned
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_poisoned_task_reported_by_two_fetches_is_told_dead_once(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        caplog: pytest.LogCaptureFixture) -> None:
    app = Minitask("poisononce", broker=redis_server.url, max_deliveries=5)
    rec = app.task(name="rec")(lambda tag: tag)
    keys = QueueKeys("poisononce", "default")
    try:
        task_id = rec.delay("boom").id
        admin.delete(*keys.ready)  # as a fetch leaves it: leased (expired), delivered 5 times
        admin.zadd(keys.leases, {task_id: 1})
        admin.hset(keys.deliveries, task_id, 5)
        with caplog.at_level(logging.ERROR, logger="minitask.worker.outcomes"):
            first, _ = bury_poisoned(app, "default", task_id)  # type: ignore[arg-type]
            second, _ = bury_poisoned(app, "default", task_id)  # type: ignore[arg-type]
        assert first is not None and first.id == task_id
        assert second is None  # buried already: nothing to tell the hooks again
        told = [r for r in caplog.records if "dead-lettered task" in r.getMessage()]
        assert len(told) == 1, [r.getMessage() for r in told]
        assert admin.zrange(keys.dead, 0, -1) == [task_id.encode()]
    finally:
        app.close()
