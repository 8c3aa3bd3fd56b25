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
