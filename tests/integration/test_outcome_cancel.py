"""Outcomes: cancel, of a queued or scheduled task, before, while and after it runs, and
ids reused after a task ended.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock.
"""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import Minitask, ResultTimeout, TaskFailed, current_task
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.outcomes import ready


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
