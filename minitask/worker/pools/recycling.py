"""Recycling process pool children: a child that has handled its share of tasks, or
grown past a memory limit, ends between tasks and the supervisor starts another.

Memory is the child's resident set size now (``/proc/self/statm``), looked at after
each task: it is what the machine gives the child, it falls when the child frees
memory back to the system, and it needs no dependency. It counts the pages the child
still shares with its supervisor since the fork, so a limit must sit above the
supervisor's own size. Without ``/proc`` (macOS), the peak the system reports
(``getrusage``) stands in for it.
"""
from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass
from typing import Any, Optional

from ...errors import ConfigurationError

#: Bytes in one of the MB that --max-memory-per-child is given in.
MB = 1024 * 1024


@dataclass(frozen=True)
class Recycling:
    """When a child is replaced: after ``max_tasks`` tasks, or once its resident
    memory exceeds ``max_memory_mb`` MB after a task (None: no such limit)."""

    max_tasks: Optional[int] = None
    max_memory_mb: Optional[int] = None

    def due(self, handled: int) -> Optional[str]:
        """Why a child that has handled ``handled`` tasks ends now, or None."""
        if self.max_tasks is not None and handled >= self.max_tasks:
            return f"it handled {handled} task(s), its --max-tasks-per-child"
        if self.max_memory_mb is not None:
            used = resident_bytes()
            if used > self.max_memory_mb * MB:
                return (f"its resident memory of {used / MB:.1f} MB exceeds "
                        f"--max-memory-per-child {self.max_memory_mb} MB")
        return None


def recycling_of(pool: str, max_tasks: Any, max_memory_mb: Any) -> Optional[Recycling]:
    """The worker's recycling settings, checked; None when it recycles nothing.

    Raises:
        ConfigurationError: a limit is not an int >= 1, or the pool has no children.
    """
    for value, flag in ((max_tasks, "max_tasks_per_child"),
                        (max_memory_mb, "max_memory_per_child")):
        if value is not None and (type(value) is not int or value < 1):
            raise ConfigurationError(f"{flag} must be an int >= 1 (or None), got {value!r}")
    if max_tasks is None and max_memory_mb is None:
        return None
    if pool != "process":
        raise ConfigurationError(f"max_tasks_per_child and max_memory_per_child "
                                 f"(--max-tasks-per-child, --max-memory-per-child) recycle "
                                 f"process pool children; the {pool} pool has none (its "
                                 f"tasks share the worker's process): use --pool process, "
                                 f"or restart the worker to free its memory")
    return Recycling(max_tasks, max_memory_mb)


def resident_bytes() -> int:
    """This process's resident set size now, in bytes (the peak without /proc)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB here
