"""An asyncio app whose tasks tamper with the pool's event loop, as a task's code may
(issue 29, probe 18): a task factory that raises or returns no Task, the loop's default
executor shut down or replaced by one shut down; and the tasks that must run after.
The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine

from minitask import Minitask

app = Minitask("hostile_loop")


def _raises(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    coro.close()
    raise RuntimeError("this task factory refuses every task")


def _no_task(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    coro.close()
    return None


@app.task(name="sets_factory", retries=0)
async def sets_factory(kind: str) -> str:
    """Install a task factory on the running loop, the pool's, and leave it there."""
    asyncio.get_running_loop().set_task_factory(_raises if kind == "raises" else _no_task)
    return kind


@app.task(name="ends_executor", retries=0)
async def ends_executor(kind: str) -> str:
    """Shut the loop's default executor down, or replace it by one shut down."""
    loop = asyncio.get_running_loop()
    if kind == "shutdown":
        await loop.shutdown_default_executor()
    else:
        executor = ThreadPoolExecutor(max_workers=1)
        executor.shutdown()
        loop.set_default_executor(executor)
    return kind


@app.task(name="double")
async def double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


@app.task(name="double_timed", timeout=60)
async def double_timed(x: int) -> int:
    """``double`` with a time limit: awaited in an asyncio task of its own."""
    await asyncio.sleep(0)
    return 2 * x


@app.task(name="triple")
def triple(x: int) -> int:
    """A plain function: run in a thread beside the loop."""
    return 3 * x
