"""The count of parked tasks (``flow_parked``) goes when it reaches 0 (issue 29): a
queue whose flow-controlled tasks were parked, then all taken, cancelled or purged,
leaves no key behind holding 0. On the suite's own redis-server."""
from __future__ import annotations

from typing import Any, Iterator

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import queue_keys

pytestmark = pytest.mark.integration

KEYS = queue_keys("parkedgone", "default")


@pytest.fixture
def client(admin: "redis.Redis[bytes]") -> Iterator["redis.Redis[bytes]"]:
    yield admin


def _app(redis_server: Any) -> Minitask:
    app = Minitask("parkedgone", broker=redis_server.url)

    @app.task(max_running=1, name="one_at_a_time")
    def one_at_a_time(n: int) -> int:
        return n

    return app


def _fetch(app: Minitask, count: int) -> Any:
    return app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=60_000,
                                   count=count, max_deliveries=5)


def _left(client: "redis.Redis[bytes]") -> Any:
    return sorted(key for key in client.scan_iter(match=f"{KEYS.flow_parked}*"))


def test_a_drained_queue_leaves_no_parked_count(redis_server: Any,
                                                client: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    try:
        app.tasks["one_at_a_time"].delay_many([(n,) for n in range(4)])
        first = _fetch(app, 10)  # one leased, three parked behind its slot
        assert len(first.deliveries) == 1
        assert int(client.get(KEYS.flow_parked) or 0) == 3
        worker = app.worker()
        assert app.broker.results.ack("default", first.deliveries[0].task_id, None, 0)
        for _ in range(50):  # bounded: each call runs the one task its slot allows
            if not worker.run_once():
                break
        counts = queue_counts(app, "default")
        assert counts["ready"] == 0 and "parked" not in counts, counts
        assert _left(client) == []
    finally:
        app.close()


def test_parked_tasks_purged_in_a_batch_of_their_number_leave_no_count(
        redis_server: Any, client: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    try:
        app.tasks["one_at_a_time"].delay_many([(n,) for n in range(4)])
        assert len(_fetch(app, 10).deliveries) == 1
        assert int(client.get(KEYS.flow_parked) or 0) == 3
        # one call of purge_ready.lua whose batch ends at the last parked entry
        app.broker.admin.transport.run(
            "purge_ready", (KEYS.leases, KEYS.delayed, KEYS.dead, KEYS.messages,
                            KEYS.deliveries, KEYS.retrying, KEYS.cancelled, KEYS.order,
                            *KEYS.ready, KEYS.flow, KEYS.flow_due, KEYS.flow_limiters,
                            KEYS.flow_prefix, KEYS.flow_parked),
            (3,), "purge")
        assert _left(client) == []
    finally:
        app.close()


def test_cancelling_every_parked_task_leaves_no_count(
        redis_server: Any, client: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    try:
        handles = app.tasks["one_at_a_time"].delay_many([(n,) for n in range(3)])
        assert len(_fetch(app, 10).deliveries) == 1
        assert int(client.get(KEYS.flow_parked) or 0) == 2
        assert handles[1].cancel() and handles[2].cancel()
        assert _left(client) == []
    finally:
        app.close()
