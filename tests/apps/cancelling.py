"""An asyncio app whose task cancels every other asyncio task of the pool's event loop,
as a task's code may (issue 29, H1), and the victims it cancels; the broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os

import redis

from minitask import Minitask, current_task

app = Minitask("cancelling")


def _mark(key: str) -> None:
    """Say that an attempt started (a plain client: a mark or two per test)."""
    context = current_task()
    assert context is not None
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.rpush(f"marks:started:{key}", f"{context.id}:{context.attempt}")
    finally:
        client.close()


@app.task(name="cancels_others", retries=0)
async def cancels_others() -> int:
    """Cancel every asyncio task on the loop but this one: the pool's own among them."""
    this = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not this]
    for task in others:
        task.cancel()
    return len(others)


@app.task(name="victim", retries=0)
async def victim(key: str) -> str:
    """Mark the start, then wait long past any test's deadline."""
    _mark(key)
    await asyncio.sleep(3600)
    return key


@app.task(name="victim_retried", retries=1, retry_backoff=0.1)
async def victim_retried(key: str) -> int:
    """``victim`` on its first attempt; its second returns its number at once."""
    context = current_task()
    assert context is not None
    if context.attempt == 1:
        _mark(key)
        await asyncio.sleep(3600)
    return context.attempt


@app.task(name="double")
async def double(x: int) -> int:
    return 2 * x
