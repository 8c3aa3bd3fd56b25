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


def test_a_port_that_is_taken_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    monkeypatch.delenv("MINITASK_DASHBOARD_AUTH", raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["dashboard", "-A", "tests.apps.basic", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
