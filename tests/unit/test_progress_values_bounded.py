"""A bad progress value never changes a task's outcome nor stops later progress; a
huge message is cut, not stored whole."""
from __future__ import annotations

from typing import Callable, List

import pytest

from minitask import ConfigurationError, Minitask, current_task
from minitask.context import MAX_PROGRESS_MESSAGE, TRUNCATED
from minitask.worker.progress import ProgressWriter


def _drain(app: Minitask) -> None:
    worker = app.worker()
    for _ in range(100):
        if not worker.run_once():
            return
    raise AssertionError("the worker never ran out of tasks")


def test_a_twenty_megabyte_progress_message_is_cut_with_a_marker(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def chatty() -> str:
        context = current_task()
        assert context is not None
        context.set_progress(1, 2, "x" * 20_000_000)
        return "done"

    handle = chatty.delay()
    _drain(app)
    assert handle.get(timeout=1) == "done"
    progress = handle.progress()
    assert progress is not None and progress.message is not None
    assert len(progress.message) == MAX_PROGRESS_MESSAGE
    assert progress.message.endswith(TRUNCATED)
    assert app.broker.client.strlen(app.broker.progress.key("default", handle.id)) < 2_000


@pytest.mark.parametrize("current, message, kept", [
    (2 ** 64, "ok", float(2 ** 64)),
    (2 ** 70, "ok", float(2 ** 70)),  # (below 0: ignored, test_progress_below_zero_ignored)
    (1, "half \ud800 pair", 1),
])
def test_a_progress_value_msgpack_cannot_carry_as_it_is_is_kept_in_a_form_it_can(
        make_app: Callable[..., Minitask], current: int, message: str, kept: float) -> None:
    app = make_app()

    @app.task
    def odd() -> str:
        context = current_task()
        assert context is not None
        context.set_progress(current, None, message)
        return "returned"

    @app.task
    def later() -> str:
        context = current_task()
        assert context is not None
        context.set_progress(3, 4, "later")
        return "fine"

    first, second = odd.delay(), later.delay()
    _drain(app)
    assert first.status() == "succeeded" and first.get(timeout=1) == "returned"
    progress = first.progress()
    assert progress is not None and progress.current == kept
    assert progress.message is not None and "\ud800" not in progress.message
    assert second.get(timeout=1) == "fine"
    later_progress = second.progress()
    assert later_progress is not None and later_progress.message == "later"


def test_an_int_no_float_can_hold_is_refused_in_the_task_by_name(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    errors: List[str] = []

    @app.task
    def enormous() -> None:
        context = current_task()
        assert context is not None
        try:
            context.set_progress(10 ** 5000)
        except ConfigurationError as exc:
            errors.append(str(exc))

    handle = enormous.delay()
    _drain(app)
    assert handle.status() == "succeeded"
    assert errors and "enormous'" in errors[0] and "finite number" in errors[0]


def test_a_value_that_cannot_be_packed_is_dropped_by_the_writer_not_raised(
        make_app: Callable[..., Minitask]) -> None:
    """The writer's own guard, behind set_progress's checks: a value noted past them
    (a reporter called directly) is logged and dropped, and the writer goes on."""
    app = make_app()
    writer = ProgressWriter(app)  # the app is the host a worker serves
    noted = ("default", "bad", 2 ** 64, None, "x", 1, 60_000)
    assert writer._write([noted]) is True  # nothing to retry: it can never be packed
    good = ("default", "good", 1, 2, "fine", 1, 60_000)
    assert writer._write([noted, good]) is True
    assert app.broker.progress.read("default", "good") is not None
    assert app.broker.progress.read("default", "bad") is None
