"""Each step of a worker's heartbeat on its own, on a real redis-server (issue 29):
a broadcast ``seen`` key of another type made the beat raise before the worker's
registry record, so the worker vanished from ``status`` while it ran tasks, and
the log blamed the lease renewal."""
from __future__ import annotations

import logging

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys

pytestmark = pytest.mark.integration

QUEUE = "bq"


@pytest.mark.app(on="server")
def test_a_seen_key_of_another_type_stops_no_other_step(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    @app.task(broadcast=True, queue=QUEUE)
    def reload() -> None:
        return None

    worker = app.worker(queues=[QUEUE], subscriber="sub1")
    worker.starting()
    seen = queue_keys(app.name, QUEUE).broadcast("seen")
    admin.delete(seen)
    admin.set(seen, "x")
    registry = AppKeys(app.name).workers
    admin.zrem(registry, worker.id)
    with caplog.at_level(logging.ERROR):
        worker.beat()  # raised here: the registry record was never written
        worker.beat()
    assert admin.zscore(registry, worker.id) is not None
    refusals = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(refusals) == 1, refusals  # once, not every beat
    assert seen in refusals[0] and "renew" not in refusals[0]
    worker.forget()
