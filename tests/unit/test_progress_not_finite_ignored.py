"""``set_progress`` with a float that is not finite (NaN, an infinity) does not raise in
the task: that report is ignored, one WARNING per attempt says so, and the task, its
outcome and its later progress go on (issue 29, section 3)."""
from __future__ import annotations

import logging
import math
from typing import Callable, List

import pytest

from minitask import Minitask, current_task


def _drain(app: Minitask) -> None:
    worker = app.worker()
    for _ in range(100):
        if not worker.run_once():
            return
    raise AssertionError("the worker never ran out of tasks")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_number_that_is_not_finite_is_ignored_with_one_warning_and_the_task_goes_on(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture,
        bad: float) -> None:
    app = make_app()
    raised: List[BaseException] = []

    @app.task(name="t.measures")
    def measures() -> str:
        context = current_task()
        assert context is not None
        try:
            for _ in range(50):  # a tight loop of them: one line, not fifty
                context.set_progress(bad)
                context.set_progress(1, bad)
        except BaseException as exc:  # (what the task would see)
            raised.append(exc)
            raise
        context.set_progress(3, 4, "later")
        return "fine"

    handle = measures.delay()
    with caplog.at_level(logging.WARNING, logger="minitask"):
        _drain(app)
    assert raised == []
    assert handle.status() == "succeeded" and handle.get(timeout=1) == "fine"
    progress = handle.progress()
    assert progress is not None
    assert (progress.current, progress.total, progress.message) == (3, 4, "later")
    said = [record for record in caplog.records if "set_progress" in record.getMessage()]
    assert len(said) == 1, [record.getMessage() for record in said]
    line = said[0].getMessage()
    assert said[0].levelno == logging.WARNING
    assert "'t.measures'" in line and handle.id in line and "finite" in line
    assert app.dead_letters() == []
