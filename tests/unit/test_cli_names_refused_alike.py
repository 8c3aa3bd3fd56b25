"""A queue or task name no queue or task can have is refused alike by every
command that takes one: exit 2 (a bad argument), escaped once, before the app is
loaded (``dead list --queue`` exited 1 escaping the name twice, ``inspect recent
--queue`` exited 2, ``inspect recent --task`` answered "no recent outcomes")."""
from __future__ import annotations

from typing import List

import pytest

from minitask.cli import dead, inspect, unsubscribe
from tests.support.cli import run

ESCAPE = "x\x1b[31m"
BIDI = "x\u202e"


def _refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
             argv: List[str]) -> str:
    loaded: List[str] = []
    for command in (dead, inspect, unsubscribe):
        monkeypatch.setattr(command, "load", lambda spec: loaded.append(spec))
    code, text = run(capsys, *argv)
    assert code == 2, text
    assert loaded == []
    assert "\x1b" not in text and "\u202e" not in text
    return text


@pytest.mark.parametrize("argv", [
    ["dead", "-A", "app", "list", "--queue", ESCAPE],
    ["dead", "-A", "app", "purge", "--all", "--yes", "--queue", f"ok:{ESCAPE}"],
    ["inspect", "-A", "app", "recent", "--queue", ESCAPE],
    ["inspect", "-A", "app", "running", "--queue", "ok", "--queue", ESCAPE],
    ["unsubscribe", "-A", "app", ESCAPE, "worker-1"],
])
def test_a_bad_queue_name_is_a_bad_argument_escaped_once(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: List[str]) -> None:
    text = _refused(capsys, monkeypatch, argv)
    assert "minitask: error: queue name 'x\\x1b[31m' holds '\\x1b'" in text, text
    assert "\\\\x1b" not in text  # not escaped twice


@pytest.mark.parametrize("name", [ESCAPE, BIDI, ""])
def test_a_bad_task_name_is_refused_not_answered_with_no_outcomes(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        name: str) -> None:
    text = _refused(capsys, monkeypatch, ["inspect", "-A", "app", "recent", "--task", name])
    assert "minitask: error: task name" in text and "no task has such a name" in text
    assert "\\\\x1b" not in text and "\\\\u202e" not in text
