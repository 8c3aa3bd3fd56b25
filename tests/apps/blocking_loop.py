"""Async tasks for the asyncio pool whose code blocks its event loop (time.sleep),
with and without a time limit (issue 29, probe29o LOW-2). The broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("blocking_loop")


@app.task(name="blocks_limited", timeout=30.0, retries=0)
async def blocks_limited(seconds: float) -> str:
    time.sleep(seconds)  # the point: it holds the loop
    return "done"


@app.task(name="blocks_plain", retries=0)
async def blocks_plain(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
