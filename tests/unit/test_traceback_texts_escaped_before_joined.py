"""Each exception's own texts (message, notes, a SyntaxError's file name and text) are
escaped BEFORE a traceback's lines are joined, in the worker's log line and in the
traceback it records: Python yields a note's lines (and a SyntaxError's file name and
text) as lines of their own, so escaping what it yields kept those line breaks and a
note forged a log line. ``shown_trace`` of a traceback recorded otherwise (an older
version, a planted one) lets no line start but a traceback's own."""
from __future__ import annotations

import traceback
from typing import Callable, List

import pytest

from minitask.printable import error_trace, logged_trace, shown_trace

FORGED = "2026-11-29 12:00:00,000 ERROR forged"


def raised(fail: Callable[[], None]) -> BaseException:
    try:
        fail()
    except BaseException as error:  # what each case raises
        return error
    raise AssertionError("it did not raise")


def noted() -> None:
    error = ValueError("noted")
    error.add_note(f"E\x1b[2J\r\n{FORGED} by a note")
    error.add_note(f"{FORGED} by a note with no line break")
    raise error


def padded() -> None:
    raise ValueError(f"x\n{FORGED} by a message\n    pad")


def chained() -> None:
    try:
        padded()
    except ValueError as error:
        raise RuntimeError(f"outer\n{FORGED} by the outer one") from error


def syntax() -> None:
    raise SyntaxError(f"bad\n{FORGED} by a message",
                      (f"f\r\n{FORGED} by a file name", 1, 2, f"text\n{FORGED} by a text"))


def grouped() -> None:
    inner = KeyError("k")
    inner.add_note(f"{FORGED} by a member's note")
    raise ExceptionGroup(f"group\n{FORGED} by a group", [ValueError(f"v\n{FORGED}"), inner])


CASES = [noted, padded, chained, syntax, grouped]


def forged(text: str) -> List[str]:
    return [line for line in text.splitlines() if line.startswith(FORGED)]


@pytest.mark.parametrize("fail", CASES, ids=[case.__name__ for case in CASES])
def test_no_line_of_a_logged_or_recorded_traceback_is_forged(
        fail: Callable[[], None]) -> None:
    error = raised(fail)
    for trace in (logged_trace(error), error_trace(error)):
        assert not forged(trace), trace
        assert "\x1b" not in trace and "\r" not in trace, trace
        assert trace.startswith(("Traceback (most recent call last):",
                                 "  + Exception Group Traceback")), trace
        assert shown_trace(trace) == trace.rstrip()  # recorded escaped: shown as it is


@pytest.mark.parametrize("fail", CASES, ids=[case.__name__ for case in CASES])
def test_a_traceback_recorded_unescaped_is_shown_with_no_forged_line(
        fail: Callable[[], None]) -> None:
    error = raised(fail)
    raw = "".join(traceback.format_exception(error))
    assert forged(raw) or fail is grouped  # what an older version recorded
    shown = shown_trace(raw)
    assert not forged(shown), shown
    assert "Traceback (most recent call last):" in shown


def test_the_texts_are_kept_readable_on_one_line() -> None:
    lines = error_trace(raised(noted)).splitlines()
    assert lines[-3:] == ["ValueError: noted",
                          f"  E\\x1b[2J\\x0d\\x0a{FORGED} by a note",
                          f"  {FORGED} by a note with no line break"]
    lines = error_trace(raised(chained)).splitlines()
    assert f"ValueError: x\\x0a{FORGED} by a message\\x0a    pad" in lines
    assert lines[-1] == f"RuntimeError: outer\\x0a{FORGED} by the outer one"
    assert "The above exception was the direct cause of the following exception:" in lines
    lines = error_trace(raised(syntax)).splitlines()
    assert f'  File "f\\x0d\\x0a{FORGED} by a file name", line 1' in lines
    assert lines[-1] == f"SyntaxError: bad\\x0a{FORGED} by a message"
    shown = shown_trace("".join(traceback.format_exception(raised(chained)))).splitlines()
    assert f"ValueError: x\\x0a{FORGED} by a message" in shown
    assert f"RuntimeError: outer\\x0a{FORGED} by the outer one" in shown


def test_a_planted_traceback_starts_no_line_as_a_log_line() -> None:
    planted = f"{FORGED} first\nTraceback (most recent call last):\n{FORGED} second\n"
    lines = shown_trace(planted).splitlines()
    assert lines == [f"> {FORGED} first\\x0aTraceback (most recent call last):\\x0a"
                     f"{FORGED} second"]
    plain = "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n" \
            "    g()\nValueError: plain"
    assert shown_trace(plain) == plain
