"""What the tests of a ``cancel()`` Redis refuses share (tests/integration/
test_cancel_asks_about_its_outcome_first.py, test_cancel_unsent_*): an app of their
tasks, the refused cancel, and the run, by a worker in this process, of the task the
cancel left where it was."""
from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import queue_keys

#: Bounds the worker's run of the task (or chain) the cancel left.
DEADLINE = 30.0


def cancel_app(name: str, url: str) -> Minitask:
    """An app ``name`` on ``url`` (the producer's, or an ACL user's: the canceller's)
    with the tests' tasks: ``add`` and ``double``."""
    app = Minitask(name, broker=url)

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    return app


def refused_cancel(canceller: Minitask, task_id: str) -> BrokerError:
    """The error of ``canceller``'s ``cancel()`` of ``task_id``, which must raise one."""
    with pytest.raises(BrokerError) as raised:
        canceller.handle(task_id).cancel()
    return raised.value


def no_cancel_left(admin: "redis.Redis[bytes]", app: Minitask, step_id: str) -> None:
    """Asserts that a refused cancel of a step not sent left neither its cancelled
    outcome nor a marker that would keep the step from being sent."""
    keys = queue_keys(app.name, "default")
    assert not admin.exists(keys.result(step_id)), "a cancelled outcome was left"
    assert admin.hget(keys.once(step_id), "state") is None


def run_until_succeeded(app: Minitask, handle: Any, never: str) -> None:
    """Run ``app``'s worker here until ``handle``'s task succeeded (``never``: what the
    failure says, with its status, after ``DEADLINE``)."""
    worker = app.worker()
    deadline = time.monotonic() + DEADLINE
    while handle.status() != "succeeded":
        assert time.monotonic() < deadline, f"{never}: {handle.status()}"
        if not worker.run_once():
            time.sleep(0.05)  # (a scheduled task: not due yet)
