"""An exception with no message (``raise RuntimeError()``) reads as its type alone
everywhere: the worker's dead line, ``TaskFailed`` (its str and ``message``), ``minitask
dead list`` and ``show``, ``minitask inspect`` (trial34: "RuntimeError: failed" in the
log and TaskFailed, where "failed" read as the task's own text, but "RuntimeError: " in
``dead list``)."""
from __future__ import annotations

import logging

import pytest

from minitask import Minitask, TaskFailed
from minitask.cli import dead as dead_command
from minitask.cli import inspect as inspect_command
from tests.support.cli import operate_with, run


def test_an_error_with_no_message_reads_as_its_type_alone(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    @app.task
    def silent() -> None:
        raise RuntimeError()

    handle = silent.delay()
    with caplog.at_level(logging.INFO, logger="minitask"):
        app.worker(burst=True, pool="thread").run()
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=0)
    assert str(failed.value) == f"task {handle.id} failed: RuntimeError"
    assert failed.value.exc_type == "RuntimeError" and failed.value.message == ""
    dead_line = [r.getMessage() for r in caplog.records if " is dead (" in r.getMessage()]
    assert len(dead_line) == 1 and dead_line[0].endswith(
        f"in queue 'default'): RuntimeError; see minitask dead show -A APP "
        f"{handle.id}"), dead_line
    operate_with(app, monkeypatch, dead_command, inspect_command)
    code, listed = run(capsys, "dead", "-A", "test", "list")
    assert code == 0 and "failed / RuntimeError\n" in listed, listed
    code, shown = run(capsys, "dead", "-A", "test", "show", handle.id)
    assert code == 0 and "RuntimeError" in shown and "RuntimeError:" not in shown, shown
    code, inspected = run(capsys, "inspect", "-A", "test", handle.id)
    assert code == 0 and "RuntimeError" in inspected, inspected
    assert "RuntimeError:" not in inspected and "RuntimeError: failed" not in inspected


def test_an_error_with_a_message_reads_as_type_and_message(app: Minitask) -> None:
    @app.task
    def loud() -> None:
        raise RuntimeError("disk full")

    handle = loud.delay()
    app.worker(burst=True, pool="thread").run()
    with pytest.raises(TaskFailed, match=r"failed: RuntimeError: disk full$") as failed:
        handle.get(timeout=0)
    assert failed.value.message == "disk full"
