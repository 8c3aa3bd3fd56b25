"""``stray_output_logged``: a thread's uncaught exception, a warning and an exception
Python can only ignore become one escaped log record each, and the hooks it replaced
are put back by the outermost block, however blocks nest."""
from __future__ import annotations

import gc
import io
import logging
import sys
import threading
import warnings
from typing import Any, List

import pytest

from minitask.worker.stray import stray_output_logged

FORGED = "2026-11-29 12:00:00,000 ERROR forged"


def _fail() -> None:
    raise ValueError(f"x\x1b[2J\n{FORGED}")


class _Leaky:
    def __del__(self) -> None:
        raise ValueError(f"d\n{FORGED}")


def test_each_is_one_escaped_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with warnings.catch_warnings(), stray_output_logged():
        warnings.simplefilter("always")  # (the suite makes warnings errors)
        thread = threading.Thread(target=_fail, name=f"t\n{FORGED}")
        thread.start()
        thread.join(10)
        warnings.warn(f"w\x1b\n{FORGED}", UserWarning)
        _Leaky()
        gc.collect()
    messages = [record.getMessage() for record in caplog.records
                if record.name == "minitask.worker.stray"]
    assert len(messages) == 3, caplog.text
    assert all("\n" not in message and "\x1b" not in message for message in messages)
    assert "exception in thread t\\x0a" in messages[0]
    assert "UserWarning: w\\x1b\\x0a" in messages[1]
    traces = [record.exc_text for record in caplog.records if record.exc_text]
    assert len(traces) == 2 and all(f"\n{FORGED}" not in trace for trace in traces), traces


def test_hooks_are_put_back_by_the_outermost_block() -> None:
    before = (threading.excepthook, warnings.showwarning, sys.unraisablehook)
    with stray_output_logged():
        inside = (threading.excepthook, warnings.showwarning, sys.unraisablehook)
        assert inside != before
        with stray_output_logged():
            pass
        assert (threading.excepthook, warnings.showwarning, sys.unraisablehook) == inside
    assert (threading.excepthook, warnings.showwarning, sys.unraisablehook) == before


def test_a_warning_meant_for_a_file_of_its_own_goes_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shown: List[Any] = []
    monkeypatch.setattr(warnings, "showwarning", lambda *args: shown.append(args))
    out = io.StringIO()
    with stray_output_logged():
        warnings.showwarning("m", UserWarning, "f.py", 3, out)
    assert shown == [("m", UserWarning, "f.py", 3, out, None)]
