"""A bench interrupted (SIGTERM, Ctrl-C) while it starts a process still stops that
process: the KeyboardInterrupt raised inside ``subprocess.Popen``, after the fork, left
the new worker or redis-server unknown to the code that stops them, running for good
(issue 29, probe35 M2: CI saw a bench worker outlive its SIGTERMed bench). The signal
is sent from inside a ``Popen`` wrapped to do so right after the real one started."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any, List

import pytest

from minitask.bench import servers
from minitask.bench.interrupts import interruptible
from minitask.bench.servers import ThrowawayServer
from minitask.bench.workers import Workers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
#: the real one: the tests patch the ``subprocess`` module the bench uses
REAL_POPEN = subprocess.Popen


class SignalledPopen:
    """``subprocess.Popen`` that sends this process SIGTERM once the child runs."""

    def __init__(self) -> None:
        self.started: List["subprocess.Popen[bytes]"] = []

    def __call__(self, *args: Any, **kwargs: Any) -> "subprocess.Popen[bytes]":
        process = REAL_POPEN(*args, **kwargs)
        self.started.append(process)
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before Popen returns
        return process


def test_a_worker_started_as_sigterm_comes_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    popen = SignalledPopen()
    monkeypatch.setattr(subprocess, "Popen", popen)
    started = Workers("unused", app_env="UNUSED", app_name="unused", url="redis://unused",
                      label="the test's worker")
    started.command = SLEEPER
    try:
        with interruptible(), pytest.raises(KeyboardInterrupt):
            started.start()
        assert started.processes == popen.started, "the started worker was not recorded"
        started.stop(grace=10)
        assert popen.started[0].poll() is not None
    finally:
        for process in popen.started:
            process.kill()
            process.wait(timeout=10)


def test_a_server_started_as_sigterm_comes_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    popen = SignalledPopen()
    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(servers, "_binary", lambda: sys.executable)
    monkeypatch.setattr(ThrowawayServer, "_wait_for_ping", lambda self, timeout=0: None)
    try:
        with interruptible(), pytest.raises(KeyboardInterrupt):
            ThrowawayServer()
        assert len(popen.started) == 1
        assert popen.started[0].poll() is not None, "the interrupted start left it running"
    finally:
        for process in popen.started:
            process.kill()
            process.wait(timeout=10)


def test_outside_a_start_the_interrupt_comes_at_once() -> None:
    with interruptible(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1_000_000):  # the handler raises at the next bytecode boundary
            pass
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
