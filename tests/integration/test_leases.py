"""Leases, driven by hand: fetch, execute, beat and the ManualClock; no processes.

Two Worker objects on one Redis stand for two worker processes. Every test runs on
fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, List

import pytest
import redis

from minitask import BrokerError, Minitask, TaskFailed, current_task
from minitask.broker.keys import QueueKeys
from tests.support.waiting import wait_until

VISIBILITY = 10.0


#: The options of these tests' apps: leases of VISIBILITY seconds, dead after 3 deliveries.
SHORT_LEASES = dict(visibility_timeout=VISIBILITY, max_deliveries=3)


def lease_deadline_ms(client: Any, app: Minitask, task_id: str, queue: str = "default") -> Any:
    score = client.zscore(QueueKeys(app.name, queue).leases, task_id)
    return None if score is None else int(score) // 10


def test_fetched_task_stays_in_redis_under_a_lease_until_acked(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(1, 2)
    worker, other = app.worker(), app.worker()
    job = worker.fetch()
    assert job is not None
    assert job.delivery.task_id == handle.id
    assert job.delivery.delivery == 1
    keys = QueueKeys(app.name, "default")
    assert handle.status() == "running"
    assert redis_client.hexists(keys.messages, handle.id)
    assert lease_deadline_ms(redis_client, app, handle.id) == clock.ms + 10_000
    assert other.fetch() is None  # leased: nobody else gets it

    clock.advance(VISIBILITY - 0.001)
    assert other.fetch() is None  # still within the lease

    worker.execute(job)
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == 3
    assert lease_deadline_ms(redis_client, app, handle.id) is None
    assert not redis_client.hexists(keys.messages, handle.id)
    assert not redis_client.hexists(keys.deliveries, handle.id)


def test_expired_lease_is_delivered_again_to_another_worker_with_delivery_count_2(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    runs: List[int] = []

    @app.task
    def job() -> str:
        context = current_task()
        assert context is not None
        runs.append(context.attempt)
        return "done"

    handle = job.delay()
    lost, live = app.worker(), app.worker()
    first = lost.fetch()
    assert first is not None and first.delivery.delivery == 1
    clock.advance(VISIBILITY)  # the lost worker never renewed its lease
    second = live.fetch()
    assert second is not None
    assert second.delivery.task_id == handle.id
    assert second.delivery.delivery == 2
    assert lease_deadline_ms(redis_client, app, handle.id) == clock.ms + 10_000
    live.execute(second)
    assert handle.get(timeout=1) == "done"
    assert runs == [1]  # an attempt is counted when it ends, not when it is delivered

    lost.execute(first)  # the stalled worker finishes late: at least once, nothing revived
    keys = QueueKeys(app.name, "default")
    assert handle.status() == "succeeded"
    assert redis_client.zcard(keys.leases) == 0
    assert redis_client.hlen(keys.messages) == 0
    assert redis_client.hlen(keys.deliveries) == 0
    assert live.fetch() is None


def test_beat_renews_the_lease_so_the_task_is_not_delivered_again(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def job() -> None:
        pass

    handle = job.delay()
    holder, other = app.worker(), app.worker()
    held = holder.fetch()
    assert held is not None
    for _ in range(5):  # 40 s in all, four times the visibility timeout
        clock.advance(8)
        holder.beat()
        assert lease_deadline_ms(redis_client, app, handle.id) == clock.ms + 10_000
        assert other.fetch() is None
    assert handle.status() == "running"
    holder.execute(held)
    assert handle.status() == "succeeded"


def test_beat_stops_renewing_once_the_task_is_done(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def job() -> None:
        pass

    handle = job.delay()
    worker = app.worker()
    held = worker.fetch()
    assert held is not None
    worker.execute(held)
    worker.beat()
    assert lease_deadline_ms(redis_client, app, handle.id) is None
    assert handle.status() == "succeeded"


def test_lease_without_renewal_expires_after_beats_stop(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def job() -> None:
        pass

    handle = job.delay()
    holder, other = app.worker(), app.worker()
    assert holder.fetch() is not None
    clock.advance(8)
    holder.beat()
    clock.advance(VISIBILITY - 0.001)
    assert other.fetch() is None
    clock.advance(0.001)
    again = other.fetch()
    assert again is not None and again.delivery.task_id == handle.id
    assert again.delivery.delivery == 2


def test_redelivered_task_goes_back_to_the_head_of_its_priority(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def job(label: str) -> str:
        return label

    stalled = job.delay("stalled")
    waiting = job.delay("waiting")
    assert app.worker().fetch().delivery.task_id == stalled.id  # type: ignore[union-attr]
    clock.advance(VISIBILITY)
    urgent = job.apply_async(("urgent",), priority=9)
    worker = app.worker()
    order = []
    while True:
        held = worker.fetch()
        if held is None:
            break
        order.append(held.delivery.task_id)
        worker.execute(held)
    assert order == [urgent.id, stalled.id, waiting.id]


def test_task_whose_lease_expires_max_deliveries_times_is_dead_lettered_as_worker_lost(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    ran: List[str] = []

    @app.task
    def poison() -> None:
        ran.append("poison")

    @app.task
    def healthy() -> str:
        ran.append("healthy")
        return "fine"

    bad = poison.delay()
    good = healthy.delay()
    deliveries = []
    for _ in range(3):  # max_deliveries=3: each delivery "kills" its worker
        held = app.worker().fetch()
        assert held is not None and held.delivery.task_id == bad.id
        deliveries.append(held.delivery.delivery)
        clock.advance(VISIBILITY)
    assert deliveries == [1, 2, 3]

    survivor = app.worker()
    held = survivor.fetch()
    assert held is not None and held.delivery.task_id == good.id  # the queue goes on
    survivor.execute(held)
    assert good.get(timeout=1) == "fine"
    assert ran == ["healthy"]

    assert bad.status() == "failed"
    [dead] = app.dead_letters()
    assert dead.task_id == bad.id
    assert dead.reason == "worker lost"
    assert dead.exc_type == "WorkerLost"
    assert "max_deliveries=3" in dead.message
    with pytest.raises(TaskFailed) as caught:
        bad.get(timeout=1)
    assert caught.value.exc_type == "WorkerLost"
    keys = QueueKeys(app.name, "default")
    assert redis_client.zcard(keys.leases) == 0
    assert not redis_client.hexists(keys.deliveries, bad.id)
    assert survivor.fetch() is None


def test_requeued_poison_task_gets_a_fresh_delivery_count(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    @app.task
    def poison() -> None:
        pass

    bad = poison.delay()
    for _ in range(3):
        assert app.worker().fetch() is not None
        clock.advance(VISIBILITY)
    assert app.worker().fetch() is None
    assert bad.status() == "failed"
    assert app.requeue_dead(bad.id) is True
    held = app.worker().fetch()
    assert held is not None and held.delivery.delivery == 1


def test_delivery_count_is_reset_when_an_attempt_ends_in_a_retry(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app(visibility_timeout=VISIBILITY, max_deliveries=2)

    @app.task(retries=5, retry_backoff=0.001)
    def flaky() -> None:
        raise RuntimeError("try again")

    handle = flaky.delay()
    first = app.worker().fetch()
    assert first is not None
    clock.advance(VISIBILITY)  # one lost delivery
    worker = app.worker()
    second = worker.fetch()
    assert second is not None and second.delivery.delivery == 2
    worker.execute(second)  # attempt 1 ends: a retry, not a crash
    assert handle.status() == "retrying"
    clock.advance(1)
    third = worker.fetch()
    assert third is not None and third.delivery.delivery == 1


def test_graceful_stop_puts_a_running_task_back_at_the_head_of_its_priority_uncounted(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app(**SHORT_LEASES)

    started, release = threading.Event(), threading.Event()

    @app.task
    def blocker() -> str:
        started.set()
        release.wait(60)
        return "finished"

    @app.task
    def other(label: str) -> str:
        return label

    running = blocker.delay()
    behind = other.delay("behind")
    worker = app.worker(grace=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(started.is_set, timeout=30, message="the task to start")
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive()
        # the grace ran out: the task was given back, ahead of its priority, uncounted
        keys = QueueKeys(app.name, "default")
        assert running.status() == "queued"
        assert redis_client.zcard(keys.leases) == 0
        assert not redis_client.hexists(keys.deliveries, running.id)
        urgent = other.apply_async(("urgent",), priority=9)
        successor = app.worker()
        first = successor.fetch()
        assert first is not None and first.delivery.task_id == urgent.id
        second = successor.fetch()
        assert second is not None and second.delivery.task_id == running.id
        assert second.delivery.delivery == 1
        third = successor.fetch()
        assert third is not None and third.delivery.task_id == behind.id
    finally:
        release.set()
        # the abandoned thread still records its late result: wait for it, so that
        # nothing of this test writes to Redis after it ends
        wait_until(lambda: redis_client.exists(QueueKeys(app.name, "default").result(running.id)),
                   timeout=30, message="the abandoned attempt to finish")


def test_graceful_stop_waits_for_a_task_that_finishes_within_the_grace(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app(**SHORT_LEASES)

    started, release = threading.Event(), threading.Event()

    @app.task
    def short() -> str:
        started.set()
        release.wait(60)
        return "done in time"

    handle = short.delay()
    worker = app.worker(grace=60)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(started.is_set, timeout=30, message="the task to start")
        worker.stop()
        release.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
    finally:
        release.set()
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == "done in time"


def test_cancelled_redelivered_task_leaves_no_delivery_count_behind(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    """A re-enqueued id must start from delivery 1, or poison counting goes wrong."""
    app = make_app(**SHORT_LEASES)

    @app.task
    def job(label: str) -> str:
        return label

    stalled = job.apply_async(("first",), task_id="order-1")
    assert app.worker().fetch() is not None
    clock.advance(VISIBILITY)  # lease lost: back in the queue
    job.apply_async(("urgent",), priority=9)
    worker = app.worker()
    urgent = worker.fetch()  # reclaims order-1 into the ready queue, leases the urgent one
    assert urgent is not None and urgent.delivery.task_id != stalled.id
    worker.execute(urgent)
    assert stalled.status() == "queued"
    assert stalled.cancel() is True
    keys = QueueKeys(app.name, "default")
    assert not redis_client.hexists(keys.deliveries, stalled.id)

    again = job.apply_async(("second",), task_id="order-1")
    held = worker.fetch()
    assert held is not None and held.delivery.task_id == again.id
    assert held.delivery.delivery == 1
    worker.execute(held)
    assert again.get(timeout=1) == "second"


def test_a_lost_reply_is_a_broker_error_and_the_script_is_not_sent_again(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once written, a fetch may have run even if its reply is lost: sending it again
    would lease more tasks to nobody."""
    app = make_app(**SHORT_LEASES)

    @app.task
    def work(index: int) -> None:
        pass

    work.delay_many([(i,) for i in range(3)])
    app.broker.queues.counts("default")  # connects, and loads nothing yet
    connection = app.broker.transport.connections.own()
    read = connection.read_response
    lost = [False]

    def read_then_lose(*args: Any, **kwargs: Any) -> Any:
        reply = read(*args, **kwargs)
        if not lost[0] and isinstance(reply, list):  # the fetch's reply, not SCRIPT LOAD's
            lost[0] = True
            raise redis.ConnectionError("connection lost while reading the reply")
        return reply

    monkeypatch.setattr(connection, "read_response", read_then_lose)
    with pytest.raises(BrokerError):
        app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=10_000, count=1,
                                max_deliveries=3)
    assert redis_client.zcard(QueueKeys(app.name, "default").leases) == 1, "ran once"
