"""What the worker logs of an exception the app's code raised is bounded like what it
records (``printable.log_error``): at most 64 kB of its text in the line and 128 kB of
its traceback, head and tail, saying how much was cut; the text and JSON formats both
show that traceback, its exception lines escaped."""
from __future__ import annotations

import json
import logging

import pytest

from minitask import Minitask
from minitask.cli.logs import JsonFormatter, TaskContextFilter, TextFormatter, TEXT_FORMAT
from minitask.printable import ERROR_TRACE_MOST, log_error
from tests.support.draining import drain

HUGE = 5_000_000


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as exc:
        return exc


def test_a_dead_task_with_a_5_mb_message_is_logged_under_200_kb(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(retries=0)
    def huge() -> None:
        raise ValueError("x" * HUGE)

    huge.delay()
    caplog.set_level(logging.WARNING)
    drain(app.worker(burst=True))
    [line] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    shown = TextFormatter(TEXT_FORMAT).format(line)
    assert len(shown.encode()) < 200_000, f"logged {len(shown):,} characters"
    assert "[cut: 5,000,000 characters in all]" in line.getMessage()
    assert line.exc_info is not None, "the exception stays for an error tracker's handler"
    assert "Traceback (most recent call last)" in (line.exc_text or "")
    assert shown.count(" characters in all] ") == 2  # the message's cut, the traceback's
    assert line.filename.endswith("outcomes.py"), "the record names the line that logged it"


def test_the_traceback_is_shown_by_every_format_bounded_and_escaped() -> None:
    log = logging.getLogger("tests.logged_errors")
    records = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    log.addHandler(keep)
    log.setLevel(logging.INFO)
    try:
        log_error(log, logging.ERROR, "task %s failed", "abc",
                  error=raised(ValueError("forged\n2026 ERROR a line of its own" + "y" * HUGE)),
                  extra={"task_id": "abc"})
        log_error(log, logging.DEBUG, "not logged", error=raised(ValueError("quiet")))
    finally:
        log.removeHandler(keep)
    [record] = records
    assert record.getMessage() == "task abc failed" and record.task_id == "abc"
    assert len(record.exc_text or "") <= ERROR_TRACE_MOST + 100
    assert "ValueError: forged\\x0a2026 ERROR" in (record.exc_text or "")
    TaskContextFilter().filter(record)
    text = TextFormatter(TEXT_FORMAT).format(record)
    assert "Traceback (most recent call last)" in text and "\n2026 ERROR" not in text
    plain = logging.Formatter().format(record)
    assert plain.startswith("task abc failed\nTraceback") and len(plain) < 140_000
    entry = json.loads(JsonFormatter().format(record))
    assert entry["traceback"] == record.exc_text and entry["task_id"] == "abc"


def test_json_bounds_a_traceback_logged_with_exc_info_too() -> None:
    error = raised(ValueError("z" * HUGE))
    record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", (),
                               (ValueError, error, error.__traceback__))
    entry = json.loads(JsonFormatter().format(record))
    assert len(entry["traceback"]) <= ERROR_TRACE_MOST + 100
    assert "characters in all]" in entry["traceback"]
