"""Errors of a call name what was wrong in words that fit it (probe, issue 29): a bool
given to ``set_progress`` is said to be no count (not "an int of 1 bits"), and a call
of ``delay_many`` that does not fit the function is named by its index and arguments;
a progress message as long as minitask keeps, of 4-byte characters, reads back whole
(the readers' bound, PROGRESS_BYTES, leaves room for it)."""
from __future__ import annotations

from typing import Callable, List

import pytest

from minitask import ArgumentError, ConfigurationError, Minitask, current_task
from minitask.context import MAX_PROGRESS_MESSAGE, TRUNCATED

from tests.unit.test_progress_values_bounded import _drain


def test_a_bool_given_as_progress_is_said_to_be_no_count(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    said: List[str] = []

    @app.task(name="t.flagged")
    def flagged() -> None:
        context = current_task()
        assert context is not None
        for current, total in ((True, None), (1, False)):
            with pytest.raises(ConfigurationError) as caught:
                context.set_progress(current, total)  # type: ignore[arg-type]
            said.append(str(caught.value))

    flagged.delay()
    _drain(app)
    assert said == [
        "task 't.flagged': set_progress current must be a finite number, got True, a bool: "
        "not a count",
        "task 't.flagged': set_progress total must be a finite number, got False, a bool: "
        "not a count"]


def test_a_delay_many_call_that_does_not_fit_is_named_by_its_index(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(name="t.add")
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(ArgumentError) as caught:
        add.delay_many([(1, 2), (3, 4), (5, 6, 7)])
    assert str(caught.value) == ("task 't.add': delay_many call 2 (5, 6, 7): too many "
                                 "positional arguments")
    with pytest.raises(ArgumentError, match=r"^task 't.add': delay_many call 0 \(1,\): "
                                            r"missing a required argument: 'y'$"):
        add.delay_many([[1]])
    assert app.broker.client.keys("*ready*") == []  # nothing sent


def test_the_longest_progress_message_of_four_byte_characters_reads_back(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def wide() -> None:
        context = current_task()
        assert context is not None
        context.set_progress(1, 2, "\U0001f600" * 5_000)

    handle = wide.delay()
    _drain(app)
    progress = handle.progress()
    assert progress is not None and progress.message is not None
    assert len(progress.message) == MAX_PROGRESS_MESSAGE and progress.message.endswith(TRUNCATED)
