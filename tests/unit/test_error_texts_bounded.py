"""What a worker keeps of a task's error is bounded: its text and traceback are cut,
head and tail around a note of the length (probe 12 M3: a task raising a 20 MB
message made its result, its dead letter and its retry note 20 MB each)."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.printable import ERROR_TEXT_MOST, ERROR_TRACE_MOST, error_text, error_trace
from tests.support.draining import drain

pytestmark = pytest.mark.app("bounded")


def test_a_short_text_is_kept_whole() -> None:
    assert error_text(ValueError("short")) == "short"


def test_a_huge_error_is_kept_cut_in_its_dead_letter(app: Minitask) -> None:
    @app.task(retries=0)
    def shouts() -> None:
        raise ValueError("m" * 1_000_000)

    handle = shouts.delay()
    drain(app.worker(burst=True))
    assert handle.status() == "failed"
    [dead] = app.dead_letters()
    assert len(dead.message) <= ERROR_TEXT_MOST + 100
    assert "[cut: 1,000,000 characters in all]" in dead.message
    assert len(dead.traceback) <= ERROR_TRACE_MOST + 100
    assert dead.traceback.startswith("Traceback (most recent call last)")


def test_a_huge_traceback_keeps_its_head_and_tail() -> None:
    try:
        raise KeyError("k" * 500_000)
    except KeyError as error:
        trace = error_trace(error)
    assert trace.startswith("Traceback") and trace.endswith("'\n")
    assert "characters in all]" in trace and len(trace) <= ERROR_TRACE_MOST + 100
