"""A schedule of every second beside tasks that hold the worker past a tick: an
``async def`` one that blocks the asyncio pool's event loop (time.sleep), a plain one
that holds the thread pool's only slot. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("late_ticks")


@app.periodic(every=1.0, queue="late", name="each_second")
def each_second() -> None:
    """Nothing to do: its ticks are what is looked at."""


@app.task(name="blocks_loop", queue="late", retries=0)
async def blocks_loop(seconds: float) -> str:
    time.sleep(seconds)  # the point: it holds the loop
    return "done"


@app.task(name="holds_slot", queue="late", retries=0)
def holds_slot(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
