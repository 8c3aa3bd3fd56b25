"""Outcomes: an attempt over its time limit, and a task that calls ``sys.exit``, fail
that task, and the worker goes on.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock, except for the time limit itself, which is
measured on the monotonic clock.
"""
from __future__ import annotations

import sys
import time
from typing import Callable

import pytest

from minitask import Minitask, TaskFailed
from tests.support.draining import drain


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
