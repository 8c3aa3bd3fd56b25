"""A retry that expires before it starts says what ran before it: the task's record
(its result, its entry in the recent outcomes) says how many attempts ran and keeps
the last one's error, bounded. Before, the expiry wrote attempt 0 and "expired before
it started" over the retry's note: a task that had failed twice read as never run."""
from __future__ import annotations

from typing import Callable

import pytest

from minitask import Minitask, TaskFailed
from minitask.admin import activity
from minitask.broker.keys import QueueKeys
from minitask.printable import ERROR_TEXT_MOST
from minitask.stores.results import decode_result
from minitask.wire.message import Outcome
from tests.support.clock import ManualClock
from tests.support.draining import drain


def _expired_after_failing(app: Minitask, clock: ManualClock, message: str) -> str:
    @app.task(retries=3, retry_backoff=60, retry_backoff_max=60, name="flaky")
    def flaky() -> None:
        raise ValueError(message)

    handle = flaky.apply_async(expires=30)
    worker = app.worker(["default"])
    drain(worker)  # attempt 1 fails: a retry is due within 60 s
    assert handle.status() == "retrying"
    clock.advance(61)  # the retry is due, its expiry passed: it never starts
    drain(worker)
    assert handle.status() == "cancelled"
    return handle.id


def _result(app: Minitask, task_id: str) -> Outcome:
    key = QueueKeys(app.name, "default").result(task_id)
    return decode_result(app.broker.client.lindex(key, -1) or b"", task_id, key)


def test_an_expired_retry_says_how_many_attempts_ran_and_the_last_error(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app("t")
    task_id = _expired_after_failing(app, clock, "the card was declined")
    outcome = _result(app, task_id)
    assert outcome.exc_type == "Expired" and outcome.reason == "expired"
    assert outcome.attempt == 1
    assert "1 attempt(s) ran" in outcome.message
    assert "ValueError: the card was declined" in outcome.message
    assert "raise ValueError(message)" in outcome.traceback
    with pytest.raises(TaskFailed) as failed:
        app.handle(task_id).get(timeout=1)
    assert failed.value.exc_type == "Expired" and "declined" in failed.value.message
    [entry] = [e for e in activity.recent(app).tasks if e.task_id == task_id and
               e.state == "cancelled"]
    assert entry.attempt == 1 and "declined" in entry.error


def test_the_last_error_an_expired_retry_keeps_is_bounded(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app("t")
    task_id = _expired_after_failing(app, clock, "q" * 1_000_000)
    outcome = _result(app, task_id)
    assert len(outcome.message) <= ERROR_TEXT_MOST + 100
    assert "characters in all]" in outcome.message


def test_a_task_that_never_ran_expires_as_before(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app("t")

    @app.task(name="once")
    def once() -> None:
        return None

    handle = once.apply_async(expires=5)
    clock.advance(10)
    drain(app.worker(["default"]))
    outcome = _result(app, handle.id)
    assert (outcome.exc_type, outcome.attempt) == ("Expired", 0)
    assert outcome.message == "expired before it started (expires)"
