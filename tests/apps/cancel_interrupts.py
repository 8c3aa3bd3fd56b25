"""An app whose tasks raise ``KeyboardInterrupt`` as ``cancel(running=True)`` stops them:
an ``async def`` one on its ``CancelledError``, a plain one once ``cancel_requested``
says so; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import time

from minitask import Minitask, current_task

app = Minitask("cancelki")

#: The longest either task waits to be cancelled (s).
LONGEST = 600.0


@app.task(retries=0, name="a_cancel_ki")
async def a_cancel_ki() -> str:
    try:
        await asyncio.sleep(LONGEST)
    except asyncio.CancelledError:
        raise KeyboardInterrupt("raised as it was cancelled") from None
    return "never cancelled"


@app.task(retries=0, name="s_cancel_ki")
def s_cancel_ki() -> str:
    context = current_task()
    assert context is not None
    deadline = time.monotonic() + LONGEST
    while time.monotonic() < deadline:
        if context.cancel_requested:
            raise KeyboardInterrupt("raised as it was cancelled")
        time.sleep(0.01)
    return "never cancelled"


@app.task(name="double")
def double(x: int) -> int:
    return 2 * x
