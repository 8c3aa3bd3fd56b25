"""A queue or task name no queue or task can have is refused alike by every
command that takes one: a bad command line (exit 2), escaped once, before the app
is loaded and before anything else is said of it (``worker -Q`` warned that the
queue was the queue of no task, then refused it)."""
from __future__ import annotations

from typing import List

import pytest

from minitask.cli import dead, inspect, unsubscribe, worker
from minitask.cli.main import main

ESCAPE = "x\x1b[31m"
BIDI = "x\u202e"


def _refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
             argv: List[str]) -> str:
    loaded: List[str] = []
    for command in (dead, inspect, unsubscribe, worker):
        monkeypatch.setattr(command, "load", lambda spec: loaded.append(spec))
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err
    assert loaded == [] and out == ""
    assert "\x1b" not in err and "\u202e" not in err
    return err


@pytest.mark.parametrize("argv", [
    ["dead", "-A", "app", "list", "--queue", ESCAPE],
    ["inspect", "-A", "app", "recent", "--queue", ESCAPE],
    ["inspect", "-A", "app", "running", "--queue", "ok", "--queue", ESCAPE],
    ["unsubscribe", "-A", "app", ESCAPE, "worker-1"],
    ["worker", "-A", "app", "-Q", f"default,{ESCAPE}"],
])
def test_a_bad_queue_name_is_a_bad_command_line_escaped_once(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: List[str]) -> None:
    err = _refused(capsys, monkeypatch, argv)
    assert "queue name 'x\\x1b[31m' holds '\\x1b'" in err
    assert "\\\\x1b" not in err  # not escaped twice


@pytest.mark.parametrize("name", [ESCAPE, BIDI, ""])
def test_a_bad_task_name_is_refused_not_answered_with_no_outcomes(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        name: str) -> None:
    err = _refused(capsys, monkeypatch, ["inspect", "-A", "app", "recent", "--task", name])
    assert "argument --task: task name" in err and "no task has such a name" in err
    assert "\\\\x1b" not in err and "\\\\u202e" not in err


def test_worker_refuses_a_bad_queue_before_any_remark_on_the_queues(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    err = _refused(capsys, monkeypatch, ["worker", "-A", "app", "-Q", "fair,bad name"])
    assert "queue name 'bad name' holds ' ' (U+0020)" in err
    assert "queue of no task" not in err + caplog.text
