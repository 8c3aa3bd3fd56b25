"""An app whose retried attempt starts while the attempt before it is still
ending, as a loaded machine's scheduler can order them: the first attempt of
``aflaky`` fails; its ``task_postrun`` hook holds its slot ``HOLD`` seconds once the
retry is written, and the retry (backoff 0.01 s), on the other slot meanwhile, is
held ``2 * HOLD`` seconds in its ``task_prerun`` hook: the first attempt ends while
the retry is between its start and its code. Hooks sleep (await, on the asyncio
pool: ``TEST_ASYNC_HOOK`` set). The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from minitask import Minitask, current_task

app = Minitask("overlapping")
HOLD = float(os.environ.get("TEST_HOLD", "1"))


@app.task(retries=1, retry_backoff=0.01, name="aflaky")
async def aflaky() -> str:
    context = current_task()
    if context is not None and context.attempt == 1:
        raise ValueError("first attempt")
    await asyncio.sleep(0.05)  # awaits: a cancel of its own asyncio task lands here
    return "second attempt"


def _hold(context: Any, status: str = "") -> float:
    """How long a hook holds this attempt's slot."""
    if status == "retrying":
        return HOLD
    return 2 * HOLD if not status and context.attempt == 2 else 0.0


if os.environ.get("TEST_ASYNC_HOOK"):
    async def _prerun(context: Any) -> None:
        await asyncio.sleep(_hold(context))

    async def _postrun(context: Any, status: str, outcome: Any) -> None:
        await asyncio.sleep(_hold(context, status))
else:
    def _prerun(context: Any) -> None:  # type: ignore[misc]
        time.sleep(_hold(context))

    def _postrun(context: Any, status: str, outcome: Any) -> None:  # type: ignore[misc]
        time.sleep(_hold(context, status))

app.on("task_prerun", _prerun)
app.on("task_postrun", _postrun)
