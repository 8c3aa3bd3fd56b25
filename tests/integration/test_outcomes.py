"""Outcomes: results, statuses, cancel, retries with backoff, dead letters, isolation.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock, except where a real result TTL must pass.
"""
from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from typing import Any, Callable, Dict, List

import msgpack  # type: ignore[import-untyped]
import pytest

import minitask
from minitask import (DeadTask, Minitask, ResultTimeout, Retry, TaskFailed, TaskHandle,
                      current_task)
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.waiting import wait_until

UTC = dt.timezone.utc


def utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC)


def due_ms(client: Any, app: Minitask, queue: str, task_id: str) -> int:
    score = client.zscore(QueueKeys(app.name, queue).delayed, task_id)
    assert score is not None, f"{task_id} is not in the delayed set of {queue!r}"
    return int(score) // 10


def inject(app: Minitask, queue: str, task_id: str, body: bytes, priority: int = 5) -> None:
    """Enqueue raw bytes as a message, the way a producer in another language would."""
    assert app.broker.queues.enqueue(queue, [(task_id, body, priority, 0)], app.clock.now_ms()) == 1


def ready(app: Minitask, queue: str = "default") -> int:
    return int(app.broker.queues.counts(queue)["ready"])


class Flaky(Exception):
    pass


# -- results and statuses -------------------------------------------------------

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


def test_attempt_over_its_timeout_fails_with_time_limit_exceeded(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(timeout=0.05)
    def slow() -> str:
        time.sleep(0.3)  # real time: the limit is measured on the monotonic clock
        return "too late"

    handle = slow.delay()
    drain(app.worker())
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=1)
    assert caught.value.exc_type == "TimeLimitExceeded"
    assert "slow" in caught.value.message


def test_task_calling_sys_exit_fails_and_the_worker_goes_on(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def quitter() -> None:
        sys.exit(3)

    @app.task
    def after() -> str:
        return "still here"

    bad, good = quitter.delay(), after.delay()
    app.worker(burst=True).run()
    assert bad.status() == "failed"
    assert [d.exc_type for d in app.dead_letters()] == ["SystemExit"]
    assert good.get(timeout=1) == "still here"


# -- cancel --------------------------------------------------------------------

def test_cancel_a_queued_task_returns_true_and_it_never_runs(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task
    def job(label: str) -> None:
        ran.append(label)

    doomed = job.delay("doomed")
    kept = job.delay("kept")
    assert doomed.cancel() is True
    assert doomed.status() == "cancelled"
    app.worker(burst=True).run()
    assert ran == ["kept"]
    assert doomed.status() == "cancelled"
    assert kept.status() == "succeeded"
    with pytest.raises(TaskFailed) as caught:
        doomed.get(timeout=1)
    assert caught.value.exc_type == "Cancelled"
    assert doomed.cancel() is False


def test_reusing_the_id_of_a_finished_task_runs_it_again_with_a_fresh_status(
        make_app: Callable[..., Minitask]) -> None:
    """An id is free again once its task ended: the old result must not answer for the
    new run (a pending id, though, is still not enqueued twice)."""
    app = make_app()

    @app.task
    def double(x: int) -> int:
        return 2 * x

    first = double.apply_async((1,), task_id="nightly")
    drain(app.worker())
    assert first.get(timeout=1) == 2
    second = double.apply_async((21,), task_id="nightly")
    assert second.status() == "queued"
    with pytest.raises(ResultTimeout):
        second.get(timeout=0.05)
    double.apply_async((500,), task_id="nightly")  # pending: left as it is
    assert drain(app.worker()) == 1
    assert second.get(timeout=1) == 42
    assert app.handle("nightly").status() == "succeeded"


def test_reusing_the_id_of_a_cancelled_task_runs_the_new_call(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task
    def job(label: str) -> str:
        ran.append(label)
        return label

    assert job.apply_async(("old",), task_id="same").cancel() is True
    again = job.apply_async(("new",), task_id="same")
    assert again.status() == "queued"
    assert ready(app) == 1
    drain(app.worker())
    assert ran == ["new"]
    assert again.get(timeout=1) == "new"
    assert ready(app) == 0


def test_ready_count_leaves_out_cancelled_tasks_per_priority_until_fetch_drops_them(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> None:
        pass

    handles = [job.apply_async((n,), priority=n % 3) for n in range(9)]
    for handle in handles[:4]:
        assert handle.cancel() is True
    counts = app.broker.queues.counts("default")
    assert counts["ready"] == 5
    assert counts["ready_by_priority"] == {"2": 2, "1": 2, "0": 1}
    assert drain(app.worker()) == 5
    counts = app.broker.queues.counts("default")
    assert counts["ready"] == 0 and counts["ready_by_priority"] == {}
    assert app.broker.client.zcard(QueueKeys(app.name, "default").cancelled) == 0


def test_cancel_a_scheduled_task_returns_true_and_it_never_runs(
        make_app: Callable[..., Minitask], clock: Any, redis_client: Any) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task
    def job() -> None:
        ran.append(1)

    handle = job.apply_in(10)
    assert handle.cancel() is True
    assert handle.status() == "cancelled"
    clock.advance(3600)
    assert drain(app.worker()) == 0
    assert ran == []
    keys = QueueKeys(app.name, "default")
    assert redis_client.zcard(keys.delayed) == 0
    assert redis_client.hlen(keys.messages) == 0


def test_cancel_returns_false_once_the_task_ran(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job() -> int:
        return 3

    handle = job.delay()
    drain(app.worker())
    assert handle.cancel() is False
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == 3


def test_cancel_returns_false_while_the_task_runs(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    answers: List[bool] = []

    @app.task
    def job() -> str:
        context = current_task()
        assert context is not None
        answers.append(app.handle(context.id).cancel())
        return "finished"

    handle = job.delay()
    drain(app.worker())
    assert answers == [False]
    assert handle.get(timeout=1) == "finished"


# -- retries ----------------------------------------------------------------------

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


# -- dead letters -------------------------------------------------------------------

def test_dead_letter_keeps_arguments_error_and_time(make_app: Callable[..., Minitask],
                                                    clock: Any) -> None:
    app = make_app()

    @app.task(name="shop.charge", queue="payments")
    def charge(order_id: int, amount: float, currency: str = "EUR") -> None:
        raise RuntimeError(f"card declined for {order_id}")

    handle = charge.delay(17, 9.5, currency="USD")
    clock.advance(2)
    drain(app.worker())
    [dead] = app.dead_letters()
    assert isinstance(dead, DeadTask)
    assert dead.task_id == handle.id
    assert dead.queue == "payments"
    assert dead.name == "shop.charge"
    assert dead.args == [17, 9.5]
    assert dead.kwargs == {"currency": "USD"}
    assert dead.exc_type == "RuntimeError"
    assert dead.message == "card declined for 17"
    assert "card declined for 17" in dead.traceback and "charge" in dead.traceback
    assert dead.dead_at == utc(clock.ms)
    assert dead.attempts == 1
    assert app.dead_letters(queue="payments") == [dead]
    assert app.dead_letters(queue="default") == []


def test_requeue_dead_puts_the_task_back_and_it_runs(make_app: Callable[..., Minitask],
                                                     clock: Any) -> None:
    app = make_app()
    broken = [True]
    attempts: List[int] = []

    @app.task(retries=1, retry_backoff=0.001)
    def sync(account: str) -> str:
        context = current_task()
        assert context is not None
        attempts.append(context.attempt)
        if broken[0]:
            raise Flaky("upstream down")
        return f"synced {account}"

    handle = sync.delay("acme")
    worker = app.worker()
    drain(worker)
    clock.advance(1)
    drain(worker)
    assert handle.status() == "failed"
    assert [d.task_id for d in app.dead_letters()] == [handle.id]

    broken[0] = False
    assert app.requeue_dead(handle.id) is True
    assert handle.status() == "queued"
    assert app.dead_letters() == []
    assert drain(worker) == 1
    assert attempts == [1, 2, 1]  # a fresh first attempt
    assert handle.status() == "succeeded"
    assert handle.get(timeout=1) == "synced acme"
    assert app.requeue_dead(handle.id) is False
    assert app.requeue_dead("never-existed") is False


def test_purge_dead_deletes_one_all_or_one_queue(make_app: Callable[..., Minitask],
                                                 redis_client: Any) -> None:
    app = make_app()

    @app.task
    def fail(n: int) -> None:
        raise Flaky(str(n))

    @app.task(queue="other")
    def fail_other(n: int) -> None:
        raise Flaky(str(n))

    handles = [fail.delay(n) for n in range(3)]
    other = [fail_other.delay(n) for n in range(2)]
    drain(app.worker())
    assert len(app.dead_letters()) == 5

    assert app.purge_dead(handles[0].id) == 1
    assert app.purge_dead(handles[0].id) == 0
    assert {d.task_id for d in app.dead_letters()} == {h.id for h in handles[1:] + other}
    assert app.purge_dead(queue="other") == 2
    assert {d.task_id for d in app.dead_letters()} == {h.id for h in handles[1:]}
    assert app.purge_dead() == 2
    assert app.dead_letters() == []
    for queue in ("default", "other"):
        keys = QueueKeys(app.name, queue)
        assert redis_client.zcard(keys.dead) == 0
        assert redis_client.hlen(keys.dead_info) == 0
        assert redis_client.hlen(keys.messages) == 0
    assert app.requeue_dead(handles[1].id) is False


def test_message_naming_an_unregistered_task_is_dead_lettered_and_the_worker_goes_on(
        make_app: Callable[..., Minitask]) -> None:
    producer = make_app()

    @producer.task(name="shop.ghost")
    def ghost(n: int) -> None:
        raise AssertionError("must never run")

    worker_app = make_app()
    ran: List[int] = []

    @worker_app.task(name="shop.real")
    def real(n: int) -> None:
        ran.append(n)

    missing = ghost.delay(1)
    after = real.delay(2)
    worker_app.worker(burst=True).run()
    assert ran == [2]
    assert after.status() == "succeeded"
    assert missing.status() == "failed"
    [dead] = worker_app.dead_letters()
    assert dead.task_id == missing.id
    assert dead.name == "shop.ghost"
    assert dead.args == [1]
    assert dead.reason == "unknown task"
    assert dead.exc_type == "UnknownTaskError"
    assert "shop.ghost" in dead.message
    with pytest.raises(TaskFailed) as caught:
        missing.get(timeout=1)
    assert caught.value.exc_type == "UnknownTaskError"


@pytest.mark.parametrize("body", [
    b"\xc1 not msgpack at all",
    msgpack.packb({"v": 99, "id": "x", "task": "shop.real", "args": [], "kwargs": {}}),
    msgpack.packb({"v": 1, "id": "x"}),
    b"",
], ids=["garbage", "unknown-version", "missing-fields", "empty"])
def test_undecodable_message_is_dead_lettered_with_the_reason_and_the_worker_goes_on(
        make_app: Callable[..., Minitask], redis_client: Any, body: bytes) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(name="shop.real")
    def real(n: int) -> None:
        ran.append(n)

    inject(app, "default", "corrupt-1", body)
    after = real.delay(1)
    app.worker(burst=True).run()
    assert ran == [1]
    assert after.status() == "succeeded"
    [dead] = app.dead_letters()
    assert dead.task_id == "corrupt-1"
    assert dead.reason == "the message cannot be decoded"
    assert dead.exc_type == "DecodeError"
    assert app.handle("corrupt-1").status() == "failed"
    keys = QueueKeys(app.name, "default")
    assert redis_client.hget(keys.messages, "corrupt-1") == body  # kept for inspection
    assert ready(app) == 0 and redis_client.zcard(keys.leases) == 0


def test_return_value_msgpack_cannot_encode_fails_the_task_with_a_clear_error(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(name="shop.report")
    def report() -> Any:
        return {"rows": [1, 2, {3, 4}]}

    @app.task(name="shop.huge")
    def huge() -> int:
        return 2 ** 70

    handle, big = report.delay(), huge.delay()
    drain(app.worker())
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=1)
    assert caught.value.exc_type == "EncodeError"
    assert "return value" in caught.value.message
    assert "shop.report" in caught.value.message
    assert big.status() == "failed"
    assert {d.task_id for d in app.dead_letters()} == {handle.id, big.id}


# -- the running attempt's context ----------------------------------------------------

def test_current_task_describes_the_running_attempt(make_app: Callable[..., Minitask],
                                                    clock: Any) -> None:
    app = make_app()
    contexts: List[Any] = []

    @app.task(name="shop.ctx", queue="ctx", priority=4)
    def ctx() -> None:
        contexts.append(current_task())

    assert current_task() is None
    enqueued_ms = clock.ms
    now = ctx.delay()
    later = ctx.apply_async(priority=8, delay=10)
    clock.advance(10)
    drain(app.worker(queues=["ctx"]))
    by_id = {context.id: context for context in contexts}
    first, second = by_id[now.id], by_id[later.id]
    assert first.name == "shop.ctx"
    assert first.queue == "ctx"
    assert (first.priority, second.priority) == (4, 8)
    assert (first.attempt, first.delivery) == (1, 1)
    assert first.enqueued_at == utc(enqueued_ms) and first.enqueued_at.tzinfo is not None
    assert first.eta is None
    assert second.eta == utc(enqueued_ms + 10_000)
    assert current_task() is None


def test_current_task_reports_the_per_call_queue(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    queues: List[str] = []

    @app.task
    def where() -> None:
        context = current_task()
        assert context is not None
        queues.append(context.queue)

    where.apply_async(queue="special")
    drain(app.worker(queues=["special"]))
    assert queues == ["special"]


# -- isolation and identity -------------------------------------------------------

def test_two_apps_on_one_redis_never_see_each_others_tasks(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    shop, blog = make_app("shop"), make_app("blog")
    ran: List[str] = []

    @shop.task(name="common.job")
    def shop_job() -> str:
        ran.append("shop")
        return "shop"

    @blog.task(name="common.job")
    def blog_job() -> str:
        ran.append("blog")
        return "blog"

    shop_handle, blog_handle = shop_job.delay(), blog_job.delay()
    assert drain(shop.worker()) == 1
    assert ran == ["shop"]
    assert blog_handle.status() == "queued"
    assert shop.handle(blog_handle.id).status() == "unknown"
    assert blog.handle(shop_handle.id).status() == "unknown"
    assert drain(blog.worker()) == 1
    assert ran == ["shop", "blog"]
    assert blog_handle.get(timeout=1) == "blog"
    assert shop_handle.get(timeout=1) == "shop"
    for key in redis_client.keys("*"):
        assert key.startswith((b"minitask:{shop", b"minitask:{blog")), key


def test_apps_whose_names_share_a_prefix_are_isolated(make_app: Callable[..., Minitask]) -> None:
    one, other = make_app("shop"), make_app("shop2")
    ran: List[str] = []

    @one.task(name="job")
    def first() -> None:
        ran.append("shop")

    @other.task(name="job")
    def second() -> None:
        ran.append("shop2")

    first.delay()
    second.delay()
    drain(other.worker())
    assert ran == ["shop2"]
    drain(one.worker())
    assert ran == ["shop2", "shop"]


def test_reenqueueing_a_pending_task_id_does_not_duplicate_it(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task
    def job(label: str) -> str:
        ran.append(label)
        context = current_task()
        assert context is not None
        job.apply_async(("while-running",), task_id=context.id)
        return label

    first = job.apply_async(("first",), task_id="order-7")
    second = job.apply_async(("second",), task_id="order-7")
    assert second.id == first.id == "order-7"
    keys = QueueKeys(app.name, "default")
    assert ready(app) == 1
    scheduled = job.apply_async(("s1",), task_id="later-1", delay=5)
    job.apply_async(("s2",), task_id="later-1", delay=5)
    job.apply_async(("s3",), task_id="later-1")  # even as "now"
    assert redis_client.zcard(keys.delayed) == 1 and ready(app) == 1
    clock.advance(5)
    drain(app.worker())
    assert ran == ["first", "s1"]
    assert first.get(timeout=1) == "first"
    assert scheduled.get(timeout=1) == "s1"


def test_handle_by_id_finds_a_task_sent_to_a_per_call_queue(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n * 2

    sent = job.apply_async((21,), queue="special")
    found = app.handle(sent.id)
    assert found.status() == "queued"
    fresh_app = make_app()  # another process, say: knows nothing but the id
    assert fresh_app.handle(sent.id).status() == "queued"
    drain(app.worker(queues=["special"]))
    assert found.status() == "succeeded"
    assert fresh_app.handle(sent.id).get(timeout=1) == 42
    assert app.handle(sent.id).get(timeout=1) == 42


def test_dead_letters_cover_per_call_queues(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def fail() -> None:
        raise Flaky("no")

    handle = fail.apply_async(queue="special")
    drain(app.worker(queues=["special"]))
    assert [d.task_id for d in make_app().dead_letters()] == [handle.id]
    assert make_app().requeue_dead(handle.id) is True
    assert app.handle(handle.id).status() == "queued"
