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
def app(redis_server: Any, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = Minitask("parkedgone", broker=redis_server.url)

    @made.task(max_running=1, name="one_at_a_time")
    def one_at_a_time(n: int) -> int:
        return n

    try:
        yield made
    finally:
        made.close()


def _parked(app: Minitask, admin: "redis.Redis[bytes]", sent: int) -> Any:
    """``sent`` tasks sent and one fetch: the first leased, the others parked behind
    its slot. The handles, and that fetch's deliveries."""
    handles = app.tasks["one_at_a_time"].delay_many([(n,) for n in range(sent)])
    first = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=60_000,
                                    count=10, max_deliveries=5)
    assert len(first.deliveries) == 1
    assert int(admin.get(KEYS.flow_parked) or 0) == sent - 1
    return handles, first.deliveries


def _left(admin: "redis.Redis[bytes]") -> Any:
    return sorted(key for key in admin.scan_iter(match=f"{KEYS.flow_parked}*"))


def test_a_drained_queue_leaves_no_parked_count(app: Minitask,
                                                admin: "redis.Redis[bytes]") -> None:
    _, leased = _parked(app, admin, 4)
    worker = app.worker()
    assert app.broker.results.ack("default", leased[0].task_id, None, 0)
    for _ in range(50):  # bounded: each call runs the one task its slot allows
        if not worker.run_once():
            break
    counts = queue_counts(app, "default")
    assert counts["ready"] == 0 and "parked" not in counts, counts
    assert _left(admin) == []


def test_parked_tasks_purged_in_a_batch_of_their_number_leave_no_count(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    _parked(app, admin, 4)
    # one call of purge_ready.lua whose batch ends at the last parked entry
    app.broker.admin.transport.run(
        "purge_ready", (KEYS.leases, KEYS.delayed, KEYS.dead, KEYS.messages,
                        KEYS.deliveries, KEYS.retrying, KEYS.cancelled, KEYS.order,
                        *KEYS.ready, KEYS.flow, KEYS.flow_due, KEYS.flow_limiters,
                        KEYS.flow_prefix, KEYS.flow_parked),
        (3,), "purge")
    assert _left(admin) == []


def test_cancelling_every_parked_task_leaves_no_count(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    handles, _ = _parked(app, admin, 3)
    assert handles[1].cancel() and handles[2].cancel()
    assert _left(admin) == []
