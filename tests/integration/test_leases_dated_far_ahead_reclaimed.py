"""A lease dated further ahead than any worker takes one for (planted, or corrupt:
the year 2096, inf) is reclaimed by the next fetch as an expired one, on a real
redis-server: its task runs, and the max_running slot it held frees (issue 29,
section 3). A lease a worker of a longer visibility_timeout took stays its own."""
from __future__ import annotations

import time
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]

YEAR_2096_MS = 3_976_214_400_000


def lease_of_a_dead_worker(app: Minitask, admin: "redis.Redis[bytes]", score: float) -> str:
    """Lease the queue's first task as a worker would, then date its lease `score`
    (a lease score: ms * 10 + 9 - priority), as if that worker died holding it."""
    now_ms = app.clock.now_ms()
    taken = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=30_000, count=1,
                                    max_deliveries=5)
    (delivery,) = taken.deliveries
    admin.zadd(queue_keys(app.name, "default").leases, {delivery.task_id: score})
    return delivery.task_id


def run_until(app: Minitask, ran: List[int], want: List[int], within: float = 30.0) -> None:
    """Fetch and run, one task at a time in this thread, as a worker does (a fetch that
    made a lease due says to fetch again at once), until ``ran`` holds ``want``."""
    worker = app.worker(burst=True)
    deadline = time.monotonic() + within
    while sorted(ran) != want and time.monotonic() < deadline:
        worker.run_once()
    assert sorted(ran) == want


@pytest.mark.parametrize("score", [YEAR_2096_MS * 10 + 4, float("inf"), 2.0 ** 60])
def test_a_lease_dated_far_ahead_is_reclaimed_and_its_task_runs(
        app: Minitask, admin: "redis.Redis[bytes]", score: float) -> None:
    ran: List[int] = []

    @app.task()
    def job(n: int) -> None:
        ran.append(n)

    job.delay(1)
    lease_of_a_dead_worker(app, admin, score)
    run_until(app, ran, [1])
    assert admin.zcard(queue_keys(app.name, "default").leases) == 0


def test_the_slot_a_far_ahead_lease_held_frees(app: Minitask,
                                               admin: "redis.Redis[bytes]") -> None:
    ran: List[int] = []

    @app.task(max_running=1)
    def limited(n: int) -> None:
        ran.append(n)

    limited.delay(1)
    limited.delay(2)
    lease_of_a_dead_worker(app, admin, YEAR_2096_MS * 10 + 4)
    run_until(app, ran, [1, 2])


def test_a_lease_of_a_longer_visibility_timeout_stays_held(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """Another worker's lease 50 minutes ahead (its visibility_timeout) is
    within what a fetch of a 30 s lease tolerates: not taken from it."""
    @app.task()
    def job() -> None:
        pass

    job.delay()
    now_ms = app.clock.now_ms()
    task_id = lease_of_a_dead_worker(app, admin, (now_ms + 3_000_000) * 10 + 4)
    worker = app.worker(burst=True)
    for _ in range(3):  # each fetch that leases none looks for leases dated far ahead
        assert not worker.run_once()
    assert admin.zscore(queue_keys(app.name, "default").leases, task_id) is not None
