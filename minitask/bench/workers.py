"""The bench's worker processes, and what they cost.

``Workers`` starts ``python -m minitask worker -A <module>:app`` under a bench's
throwaway app name, each in a session of its own so that stopping it (SIGTERM,
then SIGKILL after a grace period) stops its children too; every wait for them
has a deadline. ``CpuMeter``, ``children`` and ``tree_rss_kib`` read their CPU
time and memory from ``/proc`` (Linux; elsewhere they find nothing).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import redis

from ..broker.keys import AppKeys
from ..errors import BrokerError
from .interrupts import starting


class Workers:
    """The worker processes one bench starts, all loading the app of ``module``."""

    def __init__(self, module: str, *, app_env: str, app_name: str, url: str,
                 label: str) -> None:
        """``app_env`` is the variable ``module`` reads its app's name from; ``label``
        names the workers in errors ("the flow bench's worker")."""
        self.command = [sys.executable, "-m", "minitask", "worker", "-A", f"{module}:app",
                        "--loglevel", "WARNING"]
        self.env = {**os.environ, app_env: app_name, "MINITASK_BROKER_URL": url}
        self.app_name = app_name
        self.label = label
        self.processes: List["subprocess.Popen[bytes]"] = []

    def start(self, *args: str, env: Optional[Mapping[str, str]] = None
              ) -> "subprocess.Popen[bytes]":
        """One more worker, with these command-line ``args`` and extra ``env``."""
        with starting():
            process = subprocess.Popen(
                [*self.command, *args], env={**self.env, **(env or {})},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self.processes.append(process)
        return process

    def wait_for(self, ready: Callable[[], object], *, timeout: float = 30.0,
                 interval: float = 0.05, settle: float = 0.0) -> None:
        """Poll ``ready`` every ``interval`` s until it is true, then sleep ``settle`` s
        (for the workers to reach their blocking wait).

        Raises:
            BrokerError: ``timeout`` s passed first, or a worker exited meanwhile.
        """
        deadline = time.monotonic() + timeout
        while not ready():
            if self.exited():
                raise BrokerError(f"{self.label} exited before it was ready")
            if time.monotonic() > deadline:
                raise BrokerError(f"{self.label} was not ready within {timeout:g} s")
            time.sleep(interval)
        time.sleep(settle)

    def wait_registered(self, client: "redis.Redis", count: int, *,
                        timeout: float = 30.0, settle: float = 0.3) -> None:
        """Wait until ``count`` workers of the app have sent a heartbeat."""
        key = AppKeys(self.app_name).workers
        self.wait_for(lambda: client.zcard(key) >= count, timeout=timeout, settle=settle)

    def exited(self) -> bool:
        return any(process.poll() is not None for process in self.processes)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM every worker's process group; SIGKILL those not gone after ``grace`` s."""
        for process in self.processes:
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()


def _signal_group(process: "subprocess.Popen[bytes]", signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended since we looked
        os.killpg(process.pid, signum)


class CpuMeter:
    """CPU time (user + system) that groups of processes spend from now on, from /proc."""

    def __init__(self, groups: Dict[str, List[int]]) -> None:
        self.groups = groups
        self.before = {name: cpu_seconds(pids) for name, pids in groups.items()}

    def per_task_us(self, tasks: int) -> Dict[str, float]:
        return {name: (cpu_seconds(pids) - self.before[name]) / tasks * 1e6
                for name, pids in self.groups.items() if pids}


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU time (user + system) the processes ``pids`` spent so far, from /proc."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and its children, from /proc (Linux)."""
    total = 0
    for member in [pid, *children(pid)]:
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def children(pid: int) -> Iterator[int]:
    """The pids of a process's children (a worker's pool processes), from /proc."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return iter([int(child) for child in listing.read().split()])
    except OSError:
        return iter([])
