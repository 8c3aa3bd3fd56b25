"""Async tasks for the asyncio pool whose coroutine takes its cancellation and goes
on (issue 29): ``stubborn`` awaits until its release file exists, whatever cancels
it. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os

from minitask import Minitask

app = Minitask("overrun", visibility_timeout=3.0)  # a heartbeat a second


@app.task(name="stubborn", timeout=0.5, retries=0)
async def stubborn(release: str) -> str:
    while not os.path.exists(release):
        try:
            await asyncio.sleep(0.05)
        except BaseException:  # noqa: B902 - the point: it swallows CancelledError
            pass
    return "released"


@app.task(name="quick")
async def quick(n: int) -> int:
    return n


@app.task(name="stubborn_long", timeout=120.0, retries=0)
async def stubborn_long(release: str) -> str:
    return await stubborn.func(release)  # (cancelled by cancel(running=True), not a limit)
