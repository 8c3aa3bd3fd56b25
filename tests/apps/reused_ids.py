"""An app for workflows whose steps are given explicit task ids; the broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import List

from minitask import Minitask

app = Minitask("reused")


@app.task(name="add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="total")
def total(values: List[int]) -> int:
    return sum(values)


@app.task(name="one_at_a_time", max_running=1)
def one_at_a_time(path: str, n: int) -> int:
    """Appends its start and end (monotonic-free wall times) to ``path``: runs of a task
    of max_running=1 must never overlap."""
    import time
    with open(path, "a") as out:
        out.write(f"start {n} {time.time()}\n")
    time.sleep(0.3)
    with open(path, "a") as out:
        out.write(f"end {n} {time.time()}\n")
    return n
