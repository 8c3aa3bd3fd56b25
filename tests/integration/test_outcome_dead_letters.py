"""Outcomes: dead letters: what they keep, requeue and purge, unknown tasks, messages that
do not decode, results that do not encode, per-call queues.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock.
"""
from __future__ import annotations

from typing import Any, Callable, List

import msgpack  # type: ignore[import-untyped]
import pytest

from minitask import DeadTask, Minitask, TaskFailed, current_task
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.outcomes import Flaky, inject, ready, utc


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
