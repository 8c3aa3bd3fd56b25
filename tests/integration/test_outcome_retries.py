"""Outcomes: retries, with capped and jittered exponential backoff, raised ``Retry``,
``retry_on``, and the budget's end in the dead letters.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

from minitask import Minitask, Retry, TaskFailed, current_task
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.outcomes import Flaky, due_ms


def test_failing_task_is_retried_with_capped_exponential_backoff_then_dead(
        make_app: Callable[..., Minitask], clock: Any, redis_client: Any) -> None:
    app = make_app()
    attempts: List[int] = []

    @app.task(retries=3, retry_backoff=2.0, retry_backoff_max=5.0, priority=7)
    def flaky() -> None:
        context = current_task()
        assert context is not None
        attempts.append(context.attempt)
        raise Flaky(f"attempt {context.attempt}")

    handle = flaky.delay()
    worker = app.worker()
    keys = QueueKeys(app.name, "default")
    for attempt, cap_ms in ((1, 2000), (2, 4000), (3, 5000)):
        assert worker.run_once() is True
        assert attempts[-1] == attempt
        assert handle.status() == "retrying"
        score = redis_client.zscore(keys.delayed, handle.id)
        delay_ms = int(score) // 10 - clock.ms
        assert 0 <= delay_ms <= cap_ms
        assert int(score) % 10 == 9 - 7  # keeps its priority
        if delay_ms > 0:
            clock.advance((delay_ms - 1) / 1000)
            assert worker.run_once() is False  # not before its due time
        clock.advance(cap_ms / 1000)
    assert worker.run_once() is True
    assert attempts == [1, 2, 3, 4]
    assert handle.status() == "failed"
    assert worker.run_once() is False
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=1)
    assert caught.value.exc_type == "Flaky"
    assert caught.value.message == "attempt 4"
    [dead] = app.dead_letters()
    assert dead.task_id == handle.id and dead.attempts == 4


def test_backoff_delays_are_jittered_within_the_cap(make_app: Callable[..., Minitask],
                                                    clock: Any, redis_client: Any) -> None:
    app = make_app()

    @app.task(retries=1, retry_backoff=30.0, retry_backoff_max=2.0)
    def flaky() -> None:
        raise Flaky("again")

    handles = [flaky.delay() for _ in range(40)]
    drain(app.worker())
    delays = [due_ms(redis_client, app, "default", h.id) - clock.ms for h in handles]
    assert all(0 <= d <= 2000 for d in delays)  # retry_backoff_max caps 30 s
    assert len(set(delays)) > 10  # full jitter, not a fixed delay
    assert {h.status() for h in handles} == {"retrying"}


def test_retry_raised_in_a_task_schedules_the_next_attempt_after_its_delay(
        make_app: Callable[..., Minitask], clock: Any, redis_client: Any) -> None:
    app = make_app()
    attempts: List[int] = []

    @app.task(retries=2)
    def poll(resource: str) -> str:
        context = current_task()
        assert context is not None
        attempts.append(context.attempt)
        if context.attempt == 1:
            raise Retry(delay=7)
        return f"{resource} ready on attempt {context.attempt}"

    handle = poll.delay("report")
    worker = app.worker()
    assert worker.run_once() is True
    assert handle.status() == "retrying"
    assert due_ms(redis_client, app, "default", handle.id) == clock.ms + 7000
    clock.advance(6.999)
    assert worker.run_once() is False
    clock.advance(0.001)
    assert worker.run_once() is True
    assert attempts == [1, 2]
    assert handle.get(timeout=1) == "report ready on attempt 2"


def test_retry_raised_beyond_the_retries_budget_ends_in_the_dead_letters(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    attempts: List[int] = []

    @app.task(retries=1)
    def poll() -> None:
        context = current_task()
        assert context is not None
        attempts.append(context.attempt)
        raise Retry(delay=1)

    handle = poll.delay()
    worker = app.worker()
    worker.run_once()
    clock.advance(1)
    worker.run_once()
    clock.advance(1)
    assert worker.run_once() is False
    assert attempts == [1, 2]
    assert handle.status() == "failed"
    assert [d.task_id for d in app.dead_letters()] == [handle.id]


def test_retry_on_limits_which_exceptions_are_retried(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    attempts: Dict[str, List[int]] = {"network": [], "bug": [], "subclass": []}

    @app.task(retries=2, retry_on=(ConnectionError,))
    def call(kind: str) -> None:
        context = current_task()
        assert context is not None
        attempts[kind].append(context.attempt)
        if kind == "network":
            raise ConnectionError("down")
        if kind == "subclass":
            raise ConnectionRefusedError("refused")
        raise KeyError("a bug")

    network, bug, subclass = call.delay("network"), call.delay("bug"), call.delay("subclass")
    worker = app.worker()
    drain(worker)
    assert network.status() == "retrying"
    assert subclass.status() == "retrying"
    assert bug.status() == "failed"
    for _ in range(3):
        clock.advance(10)
        drain(worker)
    assert attempts == {"network": [1, 2, 3], "bug": [1], "subclass": [1, 2, 3]}
    assert network.status() == "failed" and subclass.status() == "failed"


def test_no_retries_by_default(make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    attempts: List[int] = []

    @app.task
    def once() -> None:
        attempts.append(1)
        raise Flaky("no second chance")

    handle = once.delay()
    drain(app.worker())
    clock.advance(3600)
    drain(app.worker())
    assert attempts == [1]
    assert handle.status() == "failed"


@pytest.mark.parametrize("concurrency", [1, 2])
def test_burst_worker_runs_a_retry_that_falls_due_before_it_exits(
        make_app: Callable[..., Minitask], concurrency: int) -> None:
    """--burst processes everything ready, delayed tasks already due included."""
    app = make_app()
    attempts: List[int] = []

    @app.task(retries=1)
    def job() -> str:
        context = current_task()
        assert context is not None
        attempts.append(context.attempt)
        if context.attempt == 1:
            raise Retry(delay=0)
        return "second attempt"

    handle = job.delay()
    app.worker(burst=True, concurrency=concurrency).run()
    assert attempts == [1, 2]
    assert handle.get(timeout=1) == "second attempt"
