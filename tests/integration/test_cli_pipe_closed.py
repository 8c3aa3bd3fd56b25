"""A command whose reader goes away (``minitask inspect ... --json | head``) ends
quietly with the shell's status for SIGPIPE, not with a BrokenPipeError traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # a real process and a real pipe

PRINTS_A_LOT = ("from minitask.cli.main import run\n"
                "def command():\n"
                "    for _ in range(100_000):\n"
                "        print('x' * 100)\n"
                "    return 0\n"
                "raise SystemExit(run(command, 'WARNING'))\n")


def test_a_closed_pipe_ends_the_command_without_a_traceback() -> None:
    writer = subprocess.Popen([sys.executable, "-c", PRINTS_A_LOT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert writer.stdout is not None and writer.stderr is not None
    first = writer.stdout.readline()
    writer.stdout.close()  # the reader goes away, as head does after its lines
    try:
        status = writer.wait(timeout=60)
        errors = writer.stderr.read().decode()
    finally:
        writer.kill()
        writer.stderr.close()
    assert first == b"x" * 100 + b"\n"
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors
    assert status == 141
