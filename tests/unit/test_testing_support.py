"""minitask.testing: isolated(app) on a private fakeredis, drain(app, advance=...)."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
import redis

from minitask import ConfigurationError, Minitask, Retry, TaskFailed, current_task
from minitask.testing import TestClock, drain, isolated
from tests.support.clock import ManualClock


def make_app(broker: Any) -> Minitask:
    app = Minitask("shop", broker=broker)
    calls: List[Dict[str, Any]] = []
    app.calls = calls  # type: ignore[attr-defined]

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        calls.append({"task": "add", "at": current_task().attempt})  # type: ignore[union-attr]
        return x + y

    @app.task(name="flaky", retries=3, retry_backoff=2.0)
    def flaky() -> str:
        attempt = current_task().attempt  # type: ignore[union-attr]
        if attempt < 3:
            raise ConnectionError(f"attempt {attempt} failed")
        return f"ok on attempt {attempt}"

    @app.task(name="chain")
    def chain(n: int) -> int:
        if n:
            app.tasks["chain"].apply_async((n - 1,), queue="other")
        return n

    @app.task(name="fails")
    def fails() -> None:
        raise ValueError("bad")

    return app


@pytest.fixture
def real(fake_redis: "redis.Redis[bytes]") -> "redis.Redis[bytes]":
    """Stands for the app's real broker: isolation must never write to it."""
    return fake_redis


def test_isolated_writes_nothing_to_the_apps_own_broker_and_puts_everything_back(
        real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    clock = app.clock
    with isolated(app) as same:
        assert same is app
        handle = app.tasks["add"].delay(2, 3)
        assert drain(app) == 1
        assert handle.get(timeout=1) == 5
        assert isinstance(app.clock, TestClock)
    assert real.keys("*") == []
    assert app.clock is clock
    assert app.handle(handle.id).status() == "unknown"  # back on its own broker


def test_each_isolated_block_starts_empty_and_blocks_nest(real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        outer = app.tasks["add"].delay(1, 1)
        with isolated(app):
            assert app.handle(outer.id).status() == "unknown"
            app.tasks["add"].delay(2, 2)
            assert drain(app) == 1
        assert app.handle(outer.id).status() == "queued"
        assert drain(app) == 1


def test_drain_runs_a_delayed_task_only_once_time_is_advanced_to_it(
        real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        handle = app.tasks["add"].apply_in(60, 1, 2)
        assert drain(app) == 0
        assert drain(app, advance=59) == 0
        assert handle.status() == "scheduled"
        assert drain(app, advance=1) == 1
        assert handle.get(timeout=1) == 3


def test_drain_runs_retries_due_within_the_window_in_order(real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        handle = app.tasks["flaky"].delay()
        start = app.clock.now_ms()
        # backoff before attempt 2 is at most 2 s, before attempt 3 at most 4 s
        assert drain(app, advance=6) == 3
        assert handle.get(timeout=1) == "ok on attempt 3"
        assert app.clock.now_ms() == start + 6000


def test_drain_without_advance_leaves_a_retry_for_later(real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        handle = app.tasks["flaky"].delay()
        assert drain(app) == 1
        assert handle.status() == "retrying"


def test_drain_runs_what_tasks_enqueue_in_other_queues(real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        app.tasks["chain"].delay(3)
        assert drain(app) == 4


def test_a_failure_ends_in_the_dead_letters_as_on_a_worker(real: "redis.Redis[bytes]") -> None:
    app = make_app(real)
    with isolated(app):
        handle = app.tasks["fails"].delay()
        assert drain(app) == 1
        with pytest.raises(TaskFailed, match="bad"):
            handle.get(timeout=1)
        assert [d.task_id for d in app.dead_letters()] == [handle.id]


def test_drain_refuses_negative_time_and_moving_time_outside_isolation(
        real: "redis.Redis[bytes]") -> None:
    app = Minitask("shop", broker=real, clock=ManualClock())
    with pytest.raises(ConfigurationError, match="isolated"):
        drain(app, advance=1)
    with pytest.raises(ConfigurationError, match="0 or more"):
        drain(app, advance=-1)
    assert drain(app) == 0  # without moving time it works on any broker


def test_a_task_that_keeps_enqueueing_work_ends_the_drain_with_a_clear_error(
        real: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("minitask.testing.DRAIN_LIMIT", 5)
    app = Minitask("shop", broker=real)

    @app.task(name="forever")
    def forever() -> None:
        app.tasks["forever"].delay()

    with isolated(app):
        forever.delay()
        with pytest.raises(RuntimeError, match="keep enqueueing"):
            drain(app)


def test_retry_with_a_delay_runs_when_time_reaches_it(real: "redis.Redis[bytes]") -> None:
    app = Minitask("shop", broker=real)

    @app.task(retries=1)
    def later() -> int:
        if current_task().attempt == 1:  # type: ignore[union-attr]
            raise Retry(delay=30)
        return 7

    with isolated(app):
        handle = later.delay()
        assert drain(app, advance=29.999) == 1
        assert drain(app, advance=0.001) == 1
        assert handle.get(timeout=1) == 7


def test_an_app_that_asks_replicas_to_confirm_runs_isolated_and_gets_its_setting_back(
        real: "redis.Redis[bytes]") -> None:
    app = Minitask("shop", broker=real, durability="replicated")

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    with isolated(app):  # an in-memory server has no replica to wait for
        handle = add.delay(1, 2)
        assert drain(app) == 1 and handle.get(timeout=1) == 3
    assert app.durability.mode == "replicated"
