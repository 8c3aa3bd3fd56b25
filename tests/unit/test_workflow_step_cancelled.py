"""Cancelling a workflow step that has not started ends what waits for it: the chord's
body, the chain's later steps, each cancelled and saying which step was cancelled (not
"never enqueued or expired"), and the step's group fails; nothing waits for ever."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import Minitask, TaskFailed, chain, chord
from tests.support.draining import drain


@pytest.fixture
def tasks(app: Minitask) -> Any:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def total(values: List[int]) -> int:
        return sum(values)

    return add, total


def test_a_cancelled_chord_member_cancels_the_body_naming_the_member(
        app: Minitask, tasks: Any) -> None:
    add, total = tasks
    body = chord([add.s(1, 1).set(task_id="m1"), add.s(2, 2).set(task_id="m2")],
                 total.s()).delay()
    assert app.handle("m2").cancel() is True
    drain(app.worker(burst=True))
    with pytest.raises(TaskFailed) as failed:
        body.get(timeout=1)
    assert failed.value.exc_type == "Cancelled"
    assert "step m2 (" in str(failed.value) and "was cancelled" in str(failed.value)
    assert "never enqueued" not in str(failed.value)
    assert body.status() == "cancelled"
    assert app.handle("m1").status() == "succeeded"


def test_a_cancelled_chain_step_cancels_the_steps_after_it(app: Minitask, tasks: Any) -> None:
    add, _ = tasks
    last = chain(add.s(1, 1).set(task_id="first", delay=60), add.s(10), add.s(100)).delay()
    assert app.handle("first").cancel() is True
    drain(app.worker(burst=True))
    assert last.status() == "cancelled"
    with pytest.raises(TaskFailed, match="step first .* was cancelled"):
        last.get(timeout=1)
