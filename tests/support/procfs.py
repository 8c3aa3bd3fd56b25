"""Processes seen through /proc (Linux): no psutil needed."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence


def _stat(pid: int) -> Optional[List[str]]:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(")") + 2:].split()


def pid_running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(pid: int) -> List[int]:
    """Every process below ``pid`` (scans /proc: this kernel may lack .../children)."""
    parents: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                parents.setdefault(int(fields[1]), []).append(int(entry))
    found: List[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time the live ones among ``pids`` have used."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def rss_kb(pid: int) -> int:
    """The resident memory of process ``pid`` (kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


def group_members(pgid: int) -> List[int]:
    """The live (not zombie) processes of process group ``pgid``: a worker's, started
    in a session of its own, holds every process it forked that did not leave it."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry))
    return members
