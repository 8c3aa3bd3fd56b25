"""An app for workflow steps whose marker says "sent" though they are nowhere (a marker
minitask did not write); the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("lost")


@app.task(name="add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="quiet_add", ignore_result=True)
def quiet_add(x: int, y: int) -> int:
    return x + y


@app.task(name="limited_add", max_running=5)
def limited_add(x: int, y: int) -> int:
    """A step with a flow spec: sent by spawn_flow.lua."""
    return x + y


@app.task(name="total")
def total(values: list) -> int:  # type: ignore[type-arg]
    return sum(values)
