"""What a task costs in CPU, Redis's and the worker's: the figures to plan with.

Throughput depends on how many cores are free; CPU per task hardly does. So
beside its rates the bench reports, for each kind of task, the Redis server's
CPU per task (``used_cpu_user + used_cpu_sys`` of ``INFO cpu``, before and after:
what an operator reads) and the worker processes' CPU per task (their ``/proc``
times), and from them how many tasks a second one Redis core, and one worker
core, can carry. ``Tally`` sums windows of work; ``Capacity`` gathers the
entries a run reports.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Sequence

import redis

from .workers import children, cpu_seconds


def redis_cpu_seconds(client: "redis.Redis") -> float:
    """The server's CPU time so far, user and system, from ``INFO cpu``."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def process_tree(pids: Sequence[int]) -> List[int]:
    """Worker processes and their children (a process pool's), as they are now."""
    return [member for pid in pids for member in (pid, *children(pid))]


@dataclass
class Tally:
    """Redis's and a worker's CPU over windows of work, and the tasks they handled."""

    redis_seconds: float = 0.0
    worker_seconds: float = 0.0
    tasks: int = 0

    @contextlib.contextmanager
    def window(self, client: "redis.Redis", workers: Sequence[int], tasks: int
               ) -> Iterator[None]:
        """Count the CPU spent inside the block by the server of ``client`` and by the
        worker processes ``workers`` (with their children), for ``tasks`` tasks."""
        members = process_tree(workers)
        redis_before, worker_before = redis_cpu_seconds(client), cpu_seconds(members)
        yield
        self.worker_seconds += cpu_seconds(members) - worker_before
        self.redis_seconds += redis_cpu_seconds(client) - redis_before
        self.tasks += tasks

    @property
    def redis_us(self) -> float:
        return self.redis_seconds / max(1, self.tasks) * 1e6

    @property
    def worker_us(self) -> float:
        return self.worker_seconds / max(1, self.tasks) * 1e6


@dataclass
class Capacity:
    """The capacity entries of one run: each a kind of task and its CPU per task."""

    entries: List[Dict[str, Any]] = field(default_factory=list)

    def add(self, case: str, redis_us: float, worker_us: float, how: str) -> None:
        """One kind of task: Redis and worker CPU per task (microseconds), and how it
        was measured."""
        self.entries.append({
            "case": case, "redis_us": round(redis_us, 1), "worker_us": round(worker_us, 1),
            "per_redis_core": round(1e6 / redis_us) if redis_us > 0 else None,
            "per_worker_core": round(1e6 / worker_us) if worker_us > 0 else None,
            "how": how})

    def table(self) -> List[str]:
        """The entries as the lines of a plain-text table."""
        if not self.entries:
            return []
        lines = ["", "capacity: CPU per task (INFO cpu of the server; the worker processes' "
                     "/proc times)",
                 f"  {'case':<52} {'Redis us':>9} {'worker us':>10} {'/s per Redis core':>18} "
                 f"{'/s per worker core':>19}"]
        for entry in self.entries:
            lines.append(f"  {entry['case']:<52} {entry['redis_us']:>9,.1f} "
                         f"{entry['worker_us']:>10,.1f} {_count(entry['per_redis_core']):>18} "
                         f"{_count(entry['per_worker_core']):>19}")
            lines.append(f"  {'':<52} {entry['how']}")
        return lines


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"
