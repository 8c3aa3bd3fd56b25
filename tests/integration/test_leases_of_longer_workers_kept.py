"""A lease of a worker whose visibility_timeout is hours longer than another's stays
its own: each worker says how long its leases last (the queue's ``lease_longest``)
before it fetches, and a fetch takes for foreign only a lease further ahead than the
longest said (issue 29; a fetch of a 30 s lease took a 2 h worker's live lease for a
planted one, delivered its task again and, renewed, again, until it was poisoned)."""
from __future__ import annotations

from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]

TWO_HOURS_MS = 7_200_000
YEAR_2096_MS = 3_976_214_400_000


def leased_for(app: Minitask, admin: "redis.Redis[bytes]", lease_ms: int) -> str:
    """The queue's first task, leased as a worker of ``lease_ms`` leases it."""
    now_ms = app.clock.now_ms()
    taken = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=lease_ms, count=1,
                                    max_deliveries=5)
    (delivery,) = taken.deliveries
    return delivery.task_id


def idle_fetches(app: Minitask, times: int = 3) -> None:
    """A worker of the app's 30 s leases fetching from a queue with nothing ready: each
    such fetch looks for leases dated far ahead."""
    worker = app.worker(burst=True)
    for _ in range(times):
        assert not worker.run_once()


def test_a_two_hour_workers_lease_is_not_taken_by_a_30_second_worker(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.task()
    def job() -> None:
        pass

    job.delay()
    app.broker.registry.announce_leases(["default"], TWO_HOURS_MS)  # as its worker starts
    task_id = leased_for(app, admin, TWO_HOURS_MS)
    leases = queue_keys(app.name, "default").leases
    held = admin.zscore(leases, task_id)
    idle_fetches(app)
    assert admin.zscore(leases, task_id) == held  # not made due, not delivered again
    assert app.handle(task_id).status() == "running"


def test_the_longest_said_is_kept_and_a_lease_past_it_is_still_reclaimed(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    ran: List[int] = []

    @app.task()
    def job(n: int) -> None:
        ran.append(n)

    app.broker.registry.announce_leases(["default"], TWO_HOURS_MS)
    app.broker.registry.announce_leases(["default"], 30_000)  # a shorter one: kept longest
    longest = queue_keys(app.name, "default").lease_longest
    assert admin.zscore(longest, "ms") == TWO_HOURS_MS
    job.delay(1)
    task_id = leased_for(app, admin, TWO_HOURS_MS)
    admin.zadd(queue_keys(app.name, "default").leases, {task_id: YEAR_2096_MS * 10 + 4})
    worker = app.worker(burst=True)
    for _ in range(20):  # (the fetch that makes it due, the one that reclaims it...)
        if ran:
            break
        worker.run_once()
    assert ran == [1]


def test_a_worker_says_its_leases_before_its_first_fetch(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    idle_fetches(app, times=1)
    longest = queue_keys(app.name, "default").lease_longest
    assert admin.zscore(longest, "ms") == app.visibility_timeout * 1000


def test_a_longest_of_another_type_takes_no_lease_for_foreign(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """Unreadable, it could hide a longer worker's: no lease is taken from anyone."""
    @app.task()
    def job() -> None:
        pass

    job.delay()
    task_id = leased_for(app, admin, TWO_HOURS_MS)
    admin.set(queue_keys(app.name, "default").lease_longest, "junk")
    leases = queue_keys(app.name, "default").leases
    held = admin.zscore(leases, task_id)
    idle_fetches(app)
    assert admin.zscore(leases, task_id) == held
