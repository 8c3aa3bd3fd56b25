"""The app-wide registries holding another type (data minitask did not write) cost only
the listing: a worker still starts, beats and serves; status and the dashboard list the
app's declared queues, saying why once, instead of failing as if Redis were
unreachable. The worker registry is moved aside whole by the heartbeat, which lists the
worker again."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.admin import all_queue_counts, app_queues, live_workers
from minitask.broker.keys import AppKeys
from tests.support.draining import drain


@pytest.mark.parametrize("planted", ["queues", "workers"])
def test_a_registry_of_another_type_leaves_the_app_working(
        app: Minitask, fake_redis: "redis.Redis[bytes]", planted: str) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    registry = AppKeys(app.name)
    fake_redis.set(registry.queues if planted == "queues" else registry.workers, b"x")
    handle = add.delay(1, 2)
    worker = app.worker(burst=True)
    worker.starting()
    worker.beat()
    drain(worker)
    assert handle.get(timeout=0) == 3
    assert "default" in app_queues(app)
    assert all_queue_counts(app, app_queues(app))["default"]["ready"] == 0
    if planted == "workers":
        assert fake_redis.get(f"{registry.workers}:foreign") == b"x"
        assert [worker["queues"] for worker in live_workers(app)] == ["default"]
