"""What a copy of the worker that a task's code forked exits with as it leaves that
code (``worker/forks.py``): as Python's own exit would, through ``os._exit``."""
from __future__ import annotations

import os
from typing import Optional

import pytest

from minitask.worker.forks import current_pid, exit_code, leave_if_forked


@pytest.mark.parametrize("error, code", [
    (None, 0), (SystemExit(), 0), (SystemExit(None), 0), (SystemExit(0), 0),
    (SystemExit(3), 3), (SystemExit(256 + 7), 7), (SystemExit(-1), 255),
    (SystemExit(10 ** 30), (10 ** 30) & 0xFF), (SystemExit("a text"), 1),
    (ValueError("x"), 1), (KeyboardInterrupt(), 1)])
def test_exit_code(error: Optional[BaseException], code: int) -> None:
    assert exit_code(error) == code


def test_the_process_that_began_the_attempt_goes_on() -> None:
    leave_if_forked(current_pid(), SystemExit(0))  # returns: this is the worker


@pytest.mark.parametrize("error, code", [(None, 0), (SystemExit(4), 4),
                                         (RuntimeError("in the child"), 1)])
def test_a_forked_copy_exits_at_once(error: Optional[BaseException], code: int) -> None:
    began = current_pid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: leaves here, whatever follows
        try:
            os.close(read)
            os.dup2(write, 2)
            leave_if_forked(began, error)
        finally:
            os._exit(99)  # never reached unless it went on
    os.close(write)
    with os.fdopen(read, "rb") as said:
        shown = said.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == code
    if isinstance(error, RuntimeError):
        assert "forked by a task's code" in shown and "RuntimeError: in the child" in shown
    else:
        assert shown == ""
