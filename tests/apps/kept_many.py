"""A process pool child whose tasks' coroutines ignore their cancel (review29e F4):
``leaves`` leaves a task on its loop that takes every exception, so its attempt's
end abandons it, kept for good;
the process keeps at most ``KEPT_MOST`` (lowered here to 2) before it is replaced.
``pid`` says which child ran it. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os

from minitask import Minitask
from minitask.worker import leftovers

leftovers.KEPT_MOST = 2

app = Minitask("kept_many", visibility_timeout=3.0)


async def _stubborn() -> None:
    while True:
        try:
            await asyncio.sleep(0.05)
        except BaseException:  # noqa: B902 - the point: it swallows every exception
            pass


@app.task(name="leaves")
async def leaves() -> int:
    """Returns, leaving on its loop a task that takes every exception: the attempt's
    end cancels it, and abandons it with the loop."""
    asyncio.get_running_loop().create_task(_stubborn())
    await asyncio.sleep(0)
    return os.getpid()


@app.task(name="pid")
def pid() -> int:
    return os.getpid()
