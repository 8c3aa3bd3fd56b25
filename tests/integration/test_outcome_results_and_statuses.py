"""Outcomes: a task's status from queued to succeeded or failed, ``get`` and its
values and errors, results that expire, and tasks that keep no result.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock, except where a real result TTL must pass.
"""
from __future__ import annotations

import datetime as dt
import threading
from typing import Any, Callable, List

import pytest

import minitask
from minitask import Minitask, ResultTimeout, TaskFailed, TaskHandle, current_task
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.outcomes import Flaky, ready
from tests.support.waiting import wait_until


def test_status_goes_from_queued_through_running_to_succeeded(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    seen: List[str] = []

    @app.task
    def add(x: int, y: int) -> int:
        context = current_task()
        assert context is not None
        seen.append(app.handle(context.id).status())
        return x + y

    handle = add.delay(2, 3)
    assert isinstance(handle, TaskHandle) and isinstance(handle.id, str)
    assert handle.status() == "queued"
    assert drain(app.worker()) == 1
    assert seen == ["running"]
    assert handle.status() == "succeeded"
    assert handle.get() == 5
    assert handle.get(timeout=0.5) == 5  # can be read again


def test_status_of_a_delayed_task_is_scheduled_until_it_runs(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()

    @app.task
    def job() -> str:
        return "done"

    handle = job.apply_in(30)
    assert handle.status() == "scheduled"
    drain(app.worker())
    assert handle.status() == "scheduled"
    clock.advance(30)
    drain(app.worker())
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == "done"


def test_get_returns_values_as_msgpack_carries_them(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    when = dt.datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=2)))

    @app.task
    def echo(value: Any) -> Any:
        return value

    @app.task
    def nothing() -> None:
        return None

    sent = echo.delay({"t": (1, 2), "b": b"\x00", "when": when, "n": None, "f": 1.5})
    empty = nothing.delay()
    drain(app.worker())
    assert sent.get(timeout=1) == {"t": [1, 2], "b": b"\x00", "when": when, "n": None,
                                   "f": 1.5}
    assert empty.get(timeout=1) is None
    assert empty.status() == "succeeded"


def test_failed_task_status_and_get_raises_task_failed_with_the_remote_error(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def explode(order_id: int) -> None:
        raise ValueError(f"order {order_id} is bad")

    handle = explode.delay(42)
    drain(app.worker())
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=1)
    error = caught.value
    assert isinstance(error, minitask.MinitaskError)
    assert error.exc_type == "ValueError"
    assert error.message == "order 42 is bad"
    assert "explode" in error.traceback and "ValueError: order 42 is bad" in error.traceback
    assert "Traceback (most recent call last)" in error.traceback


def test_get_raises_result_timeout_when_the_task_is_not_done(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job() -> None:
        pass

    queued = job.delay()
    scheduled = job.apply_in(60)
    for handle in (queued, scheduled):
        with pytest.raises(ResultTimeout) as caught:
            handle.get(timeout=0.2)
        assert isinstance(caught.value, TimeoutError)
    with pytest.raises(TimeoutError):
        queued.get(timeout=0)
    assert queued.status() == "queued"


def test_get_waits_for_a_result_recorded_later_by_another_thread(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(20, 22)
    worker = app.worker(burst=True)
    start = threading.Event()

    def run() -> None:
        start.wait(10)
        worker.run()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    start.set()
    try:
        assert handle.get(timeout=30) == 42
    finally:
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_status_of_an_id_the_app_never_saw_is_unknown(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job() -> None:
        pass

    job.delay()
    handle = app.handle("no-such-task")
    assert handle.id == "no-such-task"
    assert handle.status() == "unknown"
    assert handle.cancel() is False
    with pytest.raises(ResultTimeout):
        handle.get(timeout=0.1)


def test_status_is_unknown_once_the_result_was_deleted(make_app: Callable[..., Minitask],
                                                       redis_client: Any) -> None:
    app = make_app()

    @app.task
    def job() -> int:
        return 1

    handle = job.delay()
    drain(app.worker())
    assert handle.status() == "succeeded"
    assert redis_client.delete(QueueKeys(app.name, "default").result(handle.id)) == 1
    assert handle.status() == "unknown"
    assert app.handle(handle.id).status() == "unknown"


def test_status_is_unknown_once_the_result_ttl_has_passed(make_app: Callable[..., Minitask],
                                                          redis_client: Any) -> None:
    app = make_app()

    @app.task(result_ttl=0.2)
    def job() -> int:
        return 1

    handle = job.delay()
    drain(app.worker())
    key = QueueKeys(app.name, "default").result(handle.id)
    ttl = redis_client.pttl(key)
    assert ttl == -2 or 0 < ttl <= 200  # -2: a slow machine saw it expire already
    wait_until(lambda: handle.status() == "unknown", timeout=20, message="result to expire")
    assert redis_client.exists(key) == 0


def test_result_lives_for_the_app_result_ttl_by_default(make_app: Callable[..., Minitask],
                                                        redis_client: Any) -> None:
    app = make_app(result_ttl=120)

    @app.task
    def job() -> int:
        return 1

    handle = job.delay()
    drain(app.worker())
    ttl = redis_client.pttl(QueueKeys(app.name, "default").result(handle.id))
    assert 110_000 < ttl <= 120_000


def test_ignore_result_stores_no_result_and_leaves_nothing_behind(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(ignore_result=True)
    def fire(n: int) -> int:
        ran.append(n)
        return n

    handle = fire.delay(7)
    drain(app.worker())
    assert ran == [7]
    keys = QueueKeys(app.name, "default")
    assert redis_client.exists(keys.result(handle.id)) == 0
    assert redis_client.hlen(keys.messages) == 0
    assert ready(app) == 0 and redis_client.zcard(keys.leases) == 0


def test_ignore_result_task_that_fails_is_still_dead_lettered(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(ignore_result=True)
    def fire() -> None:
        raise Flaky("lost?")

    handle = fire.delay()
    drain(app.worker())
    assert handle.status() == "failed"
    assert [d.exc_type for d in app.dead_letters()] == ["Flaky"]
