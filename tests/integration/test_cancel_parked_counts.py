"""Cancelling tasks their limits park (probe's M6): the task leaves its limiter's park
list in the cancel's own step, so ``queue_counts`` (status, the dashboard) counts it
no more at once, not when the limiter is next tried (up to an hour with a per-hour
rate); a park list left empty leaves no limiter behind.

Every test runs on fakeredis and on the suite's own redis-server (``make_app``).
"""
from __future__ import annotations

from typing import Any, Callable, List

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import FetchResult
from tests.support.clock import ManualClock

KEYS = QueueKeys("test", "default")


def _fetch(app: Minitask, clock: ManualClock, count: int = 10) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                   count=count, max_deliveries=5)


def _ids(result: FetchResult) -> List[str]:
    return [delivery.task_id for delivery in result.deliveries]


def test_cancelling_two_of_four_parked_tasks_lowers_ready_and_parked_at_once(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=2, name="heavy")
    def heavy(n: int) -> int:
        return n

    handles = heavy.delay_many([(n,) for n in range(6)])
    assert _ids(_fetch(app, clock)) == [handles[0].id, handles[1].id]
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["parked"], counts["running"]) == (4, 4, 2), counts
    assert handles[2].cancel() and handles[4].cancel()
    assert [handles[n].status() for n in (2, 4)] == ["cancelled"] * 2
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts.get("parked")) == (2, 2), counts
    assert counts["ready_by_priority"] == {}, counts  # no stale cancelled entry counted
    assert app.broker.flow.limiter_state("default", "5:heavy")["parked"] == 2
    assert redis_client.zrange(KEYS.cancelled, 0, -1) == []
    # the two left run in their order when slots free, and nothing is left over
    assert app.broker.results.ack("default", handles[0].id, None, 0)
    assert app.broker.results.ack("default", handles[1].id, None, 0)
    assert _ids(_fetch(app, clock)) == [handles[3].id, handles[5].id]
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts.get("parked"), counts["running"]) == (0, None, 2), counts


def test_cancelling_every_parked_task_leaves_no_count_nor_limiter(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(rate_limit="1/h", name="hourly")
    def hourly(n: int) -> int:
        return n

    handles = hourly.delay_many([(n,) for n in range(4)])
    assert _ids(_fetch(app, clock)) == [handles[0].id]
    assert queue_counts(app, "default")["parked"] == 3
    assert all(handle.cancel() for handle in handles[1:])
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts.get("parked")) == (0, None), counts
    assert redis_client.get(KEYS.flow_parked) is None
    assert redis_client.smembers(KEYS.flow_limiters) == set()
    assert redis_client.zrange(KEYS.flow_due, 0, -1) == []
    assert redis_client.keys(KEYS.flow_prefix + "*:park") == []


def test_cancelling_a_limited_task_still_in_its_ready_list_counts_as_before(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=1, name="one")
    def one(n: int) -> int:
        return n

    first, second = one.delay_many([(1,), (2,)])
    assert second.cancel()  # never fetched: in the ready list, not parked
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts.get("parked")) == (1, None), counts
    assert _ids(_fetch(app, clock)) == [first.id]
    assert queue_counts(app, "default")["ready"] == 0
