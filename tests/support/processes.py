"""Subprocesses a test starts (workers, example programs), and signals sent to them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

#: How long a worker may take to exit; generous for a slow shared machine.
EXIT_DEADLINE = 60.0


@dataclass
class Processes:
    """Owns every subprocess a test starts, and kills their process groups at the end."""

    env: Dict[str, str]
    cwd: Path
    started: List["subprocess.Popen[bytes]"] = field(default_factory=list)

    def start(self, *args: str, env: Optional[Dict[str, str]] = None,
              log: Optional[Path] = None) -> "subprocess.Popen[bytes]":
        output = open(log, "ab") if log else subprocess.DEVNULL
        try:
            process = subprocess.Popen([sys.executable, *args], cwd=self.cwd,
                                       env={**self.env, **(env or {})}, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if log:
                output.close()  # type: ignore[union-attr]  # the child keeps its own copy
        self.started.append(process)
        return process

    def worker(self, app: str, *args: str, **kwargs: Any) -> "subprocess.Popen[bytes]":
        return self.start("-m", "minitask", "worker", "-A", app, *args, **kwargs)

    def kill_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=10)


def send(process: "subprocess.Popen[bytes]", signum: int, *, group: bool = False) -> None:
    if group:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)


def kill_group(process: "subprocess.Popen[bytes]") -> None:
    """SIGKILL a worker with every process of its pool, as the OOM killer or a crash would."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def exit_code(process: "subprocess.Popen[bytes]", timeout: float = EXIT_DEADLINE) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker {process.pid} did not exit within {timeout} s") from None
