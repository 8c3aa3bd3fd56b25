"""Driving a worker by hand, in the test's own thread."""
from __future__ import annotations

from minitask import Worker


def drain(worker: Worker, limit: int = 100_000) -> int:
    """Run tasks one at a time in this thread until none is ready; returns how many ran."""
    ran = 0
    while worker.run_once():
        ran += 1
        assert ran <= limit, "the queue never emptied"
    return ran
