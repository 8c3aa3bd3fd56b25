"""``--auth`` (or its variable) with a blank user or password (spaces, a tab) is refused
like an empty one: ' : ' would turn "auth on" with a login anyone guesses."""
from __future__ import annotations

from typing import List

import pytest

from minitask.cli import main
from minitask.dashboard import server


@pytest.mark.parametrize("auth", [" : ", "admin: ", " :secret", "\t:\t"])
@pytest.mark.parametrize("by_env", [False, True], ids=["option", "variable"])
def test_a_blank_user_or_password_is_refused_and_nothing_serves(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], auth: str,
        by_env: bool) -> None:
    made: List[object] = []
    monkeypatch.setattr(server, "make", lambda *args: made.append(args))
    monkeypatch.delenv("MINITASK_DASHBOARD_AUTH", raising=False)
    argv = ["dashboard", "-A", "tests.apps.basic"]
    if by_env:
        monkeypatch.setenv("MINITASK_DASHBOARD_AUTH", auth)
    else:
        argv += ["--auth", auth]
    assert main(argv) == 2
    assert "must be user:password" in capsys.readouterr().err
    assert made == []
