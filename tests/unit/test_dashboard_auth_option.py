"""``--auth`` turns basic auth on only with a real user and password: ':' alone, or
an empty user or password, is refused rather than read as "auth on"."""
from __future__ import annotations

from typing import List

import pytest

from minitask.cli import main
from minitask.dashboard import server


@pytest.mark.parametrize("auth", [":", "admin:", ":secret", "admin"])
def test_an_auth_without_user_or_password_is_refused_and_nothing_serves(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], auth: str) -> None:
    made: List[object] = []
    monkeypatch.setattr(server, "make", lambda *args: made.append(args))
    monkeypatch.delenv("MINITASK_DASHBOARD_AUTH", raising=False)
    assert main(["dashboard", "-A", "tests.apps.basic", "--auth", auth]) == 2
    assert "must be user:password" in capsys.readouterr().err
    assert made == []
