"""Running ``minitask`` commands in-process on a test's app (tests/unit)."""
from __future__ import annotations

import contextlib
import io
from types import ModuleType
from typing import Tuple

import pytest

from minitask import Minitask
from minitask.cli.main import main


def operate_with(app: Minitask, monkeypatch: pytest.MonkeyPatch,
                 *commands: ModuleType) -> Minitask:
    """``app`` as ``commands`` load it; they close it as they end: kept open."""
    for command in commands:
        monkeypatch.setattr(command, "load", lambda _: app)
    monkeypatch.setattr(app, "close", lambda: None)
    return app


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str]:
    """A command's exit code and everything it wrote, stdout then stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def said(*argv: str) -> Tuple[int, str]:
    """A command's exit code and everything it wrote, stdout then stderr, caught
    without pytest's capture (for tests that read logs through ``caplog``)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()
