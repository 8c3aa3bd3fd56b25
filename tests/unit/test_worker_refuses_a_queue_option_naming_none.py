"""``worker -Q ""`` (or ``-Q ,``) names no queue: a bad command line, exit 2, before the
app is loaded (trial34: it was taken as no -Q, and the worker served the default
queues)."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.cli import worker as worker_command
from tests.support.cli import operate_with, run


@pytest.mark.parametrize("given", ["", ",", " , ,", "\u2028"])
def test_a_queue_option_naming_no_queue_is_a_bad_command_line(
        app: Minitask, given: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    operate_with(app, monkeypatch, worker_command)
    monkeypatch.setattr(app, "worker", lambda **options: pytest.fail("a worker started"))
    with pytest.raises(SystemExit) as exited:
        run(capsys, "worker", "-A", "test", "-Q", given, "--burst")
    said = capsys.readouterr().err
    assert exited.value.code == 2, said
    assert "usage: minitask worker" in said
    assert f"argument -Q/--queues: {given!r} names no queue" in said, said
