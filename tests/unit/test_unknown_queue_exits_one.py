"""A queue the app has not, given to ``--queue`` (or as ``purge``'s queue), is
"something named was not found" in every command: exit 1, as the CLI reference's
exit codes say, and nothing listed or done. A queue name no queue may have stays a
bad command line (exit 2)."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import Minitask
from minitask.cli import dead, inspect as inspect_command, purge
from minitask.cli.main import main

COMMANDS: List[List[str]] = [
    ["inspect", "-A", "x", "running", "--queue", "nosuch"],
    ["inspect", "-A", "x", "scheduled", "--queue", "nosuch"],
    ["inspect", "-A", "x", "recent", "--queue", "emails", "--queue", "nosuch"],
    ["dead", "-A", "x", "list", "--queue", "nosuch"],
    ["purge", "-A", "x", "nosuch", "--yes"],
]


@pytest.fixture
def loaded(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    @app.task(queue="emails")
    def send() -> None:
        """A task of queue emails."""

    for command in (dead, inspect_command, purge):
        monkeypatch.setattr(command, "load", lambda _: app)
    monkeypatch.setattr(app, "close", lambda: None)
    return app


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[3:5]))
def test_an_unknown_queue_exits_one_in_every_command(
        loaded: Minitask, capsys: pytest.CaptureFixture[str], argv: List[str]) -> None:
    assert main(argv) == 1
    out = capsys.readouterr()
    assert "has no queue 'nosuch'" in out.err and "its queues:" in out.err
    assert out.out == ""  # nothing listed as if the queue were empty


@pytest.mark.parametrize("argv", [[word if word != "nosuch" else "no such" for word in argv]
                                  for argv in COMMANDS], ids=lambda argv: argv[3])
def test_a_name_no_queue_may_have_is_still_a_bad_command_line(
        loaded: Minitask, capsys: pytest.CaptureFixture[str], argv: Any) -> None:
    assert main(argv) == 2
