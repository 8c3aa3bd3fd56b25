"""Whatever goes wrong while a worker handles one message ends in an outcome for it."""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.envelopes import NOW_MS, body


@pytest.mark.parametrize("raised", [KeyboardInterrupt, GeneratorExit])
def test_a_task_raising_a_base_exception_fails_that_attempt_and_the_worker_goes_on(
        make_app: Callable[..., Minitask], redis_client: Any, raised: type) -> None:
    app = make_app("shop")
    ran: List[str] = []

    @app.task(name="shop.interrupt", retries=1, retry_backoff=0)
    def interrupt() -> None:
        ran.append("interrupt")
        raise raised("from the task")

    @app.task(name="shop.after")
    def after() -> None:
        ran.append("after")

    failing = interrupt.delay()
    behind = after.delay()
    app.worker(burst=True, concurrency=2).run()

    # decided by its options like any failure: retry_on defaults to Exception, which
    # a BaseException is not, so it ends dead at once
    assert ran.count("interrupt") == 1
    assert "after" in ran and behind.status() == "succeeded"
    assert failing.status() == "failed"
    [dead] = app.dead_letters()
    assert dead.exc_type == raised.__name__
    assert redis_client.zcard(QueueKeys(app.name, "default").leases) == 0


def test_a_body_whose_id_differs_from_its_key_is_dead_lettered_not_run(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    app = make_app("shop")
    ran: List[Any] = []

    @app.task(name="shop.pair")
    def pair(a: Any = None, b: Any = None) -> None:
        ran.append((a, b))

    planted = body(id="someone-else")
    assert app.broker.queues.enqueue("default", [("planted-1", planted, 5, 0)], NOW_MS) == 1
    app.worker(burst=True).run()
    assert ran == []
    [dead] = app.dead_letters()
    assert dead.task_id == "planted-1" and dead.exc_type == "DecodeError"
    assert "'someone-else'" in dead.message


def test_an_error_of_the_worker_itself_dead_letters_the_message(
        make_app: Callable[..., Minitask], redis_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure no check foresaw (here: building the task's context) must not leave
    the message leased to a worker that goes on."""
    app = make_app("shop")

    @app.task(name="shop.job")
    def job() -> None:
        pass

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("date value out of range")

    monkeypatch.setattr("minitask.worker.runner.running", broken)
    handle = job.delay()
    app.worker(burst=True).run()
    assert handle.status() == "failed"
    [dead] = app.dead_letters()
    assert dead.reason == "internal error while handling it"
    assert dead.exc_type == "OverflowError"
    assert redis_client.zcard(QueueKeys(app.name, "default").leases) == 0
