"""A subscriber that joins after a broadcast call is not one of its subscribers, on a
real redis-server: the call's status and join read its whole since index (review of
the bounded broadcast reads: a page of one name made the handle fall back to every
cursor, late ones included, so status said unknown and join waited for the late one
until it timed out)."""
from __future__ import annotations

import time

import pytest

from minitask import Minitask
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "fan"


def test_a_late_subscriber_is_not_waited_for(redis_server: RedisServer) -> None:
    app = Minitask("late", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    try:
        store, now = app.broker.broadcasts, int(time.time() * 1000)
        for name in ("alpha", "beta", "gamma"):
            store.subscribe(QUEUE, name, now)
        handle = tick.delay(1)
        store.subscribe(QUEUE, "late", now + 5)
        assert sorted(store.names(QUEUE, handle.id) or []) == ["alpha", "beta", "gamma"]
        for name in ("alpha", "beta", "gamma"):
            worker = app.worker([QUEUE], subscriber=name)
            for _ in range(5):
                worker.run_once()
        assert handle.status() == "succeeded"
        assert handle.join(timeout=10) == {"alpha": 1, "beta": 1, "gamma": 1}
    finally:
        app.close()
