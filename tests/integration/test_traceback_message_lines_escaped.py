"""``dead show`` and ``inspect ID`` show a traceback on its own lines, but a line break
inside the exception's message escaped: a message cannot forge a log line
("2026-... ERROR ...") in the operator's terminal. A real worker records the dead
letter on a real redis-server; ``shown_trace`` is also checked on a chain."""
from __future__ import annotations

import traceback
from typing import Iterator, Tuple

import pytest

import tests.apps.ops as ops
from minitask.cli import main
from minitask.printable import printable
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.ops"
FORGED = "2026-11-29 12:00:00,000 ERROR forged line"


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, ops.app) as served:
        yield served


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_message_line_break_is_escaped_and_the_tracebacks_lines_kept(
        url: str, processes: Processes, capsys: pytest.CaptureFixture[str]) -> None:
    handle = ops.login.delay(f"ann\r\n{FORGED}\nand more", "pw")  # raises with the user's name
    worker = processes.worker(APP, "--pool", "thread", "--burst",
                              env={"MINITASK_BROKER_URL": url})
    assert exit_code(worker) == 0
    for argv in (("dead", "show", handle.id), ("inspect", handle.id)):
        code, out = _cli(capsys, argv[0], "-A", APP, *argv[1:])
        assert code == 0, out
        lines = out.splitlines()
        assert not [line for line in lines if line.startswith(FORGED)], out
        assert not [line for line in lines if line.startswith("and more")], out
        assert "Traceback (most recent call last):" in lines, out  # its own lines kept
        assert any(line.startswith('  File "') for line in lines), out
        assert f"PermissionError: user ann\\x0d\\x0a{FORGED}\\x0aand more may not log in" \
            in lines, out


def test_each_exception_of_a_chain_has_its_message_escaped() -> None:
    from minitask.printable import shown_trace  # (none on main: the test fails there)

    def fail() -> None:
        try:
            raise ValueError(f"first\n{FORGED}")
        except ValueError as exc:
            raise KeyError(f"second\n{FORGED}") from exc

    try:
        fail()
    except KeyError as exc:
        trace = "".join(traceback.format_exception(exc))
    lines = shown_trace(trace).splitlines()
    assert not [line for line in lines if line.startswith(FORGED)], lines
    assert f"ValueError: first\\x0a{FORGED}" in lines
    assert lines.count("Traceback (most recent call last):") == 2
    assert "The above exception was the direct cause of the following exception:" in lines
    assert shown_trace("no traceback\x1b[2J") == printable("no traceback\x1b[2J")
