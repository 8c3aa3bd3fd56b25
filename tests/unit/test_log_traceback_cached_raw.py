"""A traceback that another handler's formatter cached on a log record (``exc_text``:
the app's own handler on the root logger, formatting before the worker's) was printed
raw by the worker's text format: an exception message holding a newline forged a log
line there (issue 29, a variant of a low finding of probe 29e: output of task code
reaching the worker log raw). It is formatted again, escaped; ``log_error``'s own
bounded, escaped traceback is kept as it is."""
from __future__ import annotations

import logging
import sys
from typing import List

from minitask.cli.logs import TEXT_FORMAT, TextFormatter
from minitask.printable import log_error

FORGED = "2026-11-29 12:00:00,000 ERROR forged"


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _failed() -> logging.LogRecord:
    try:
        raise ValueError(f"x\n{FORGED} by a cached traceback")
    except ValueError:
        return logging.LogRecord("app", logging.ERROR, __file__, 1, "it failed", (),
                                 sys.exc_info())


def test_a_traceback_cached_raw_by_another_formatter_is_escaped() -> None:
    record = _failed()
    logging.Formatter().format(record)  # the app's own handler came first
    assert record.exc_text and f"\n{FORGED}" in record.exc_text
    text = TextFormatter(TEXT_FORMAT).format(record)
    assert not [line for line in text.splitlines() if line.startswith(FORGED)], text
    assert "by a cached traceback" in text and "ValueError" in text


def test_log_errors_own_traceback_is_kept() -> None:
    kept = _Kept()
    log = logging.getLogger("test_log_traceback_cached_raw")
    log.addHandler(kept)
    log.propagate = False
    try:
        log_error(log, logging.ERROR, "it failed", error=ValueError(f"y\n{FORGED}"))
    finally:
        log.removeHandler(kept)
    [record] = kept.records
    own = record.exc_text
    text = TextFormatter(TEXT_FORMAT).format(record)
    assert record.exc_text == own and own in text
    assert not [line for line in text.splitlines() if line.startswith(FORGED)], text
