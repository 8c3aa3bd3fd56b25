"""An asyncio app for subprocess workers in tests; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os

import redis.asyncio

from minitask import Minitask, current_task

app = Minitask("aio", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


async def _mark(kind: str, key: str) -> None:
    context = current_task()
    assert context is not None
    client = redis.asyncio.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    await client.rpush(f"marks:{kind}:{key}", f"{context.id}:{context.attempt}:{os.getpid()}")
    await client.aclose()


@app.task
async def nap(key: str, seconds: float) -> str:
    """Mark the start, sleep, mark the end."""
    await _mark("started", key)
    await asyncio.sleep(seconds)
    await _mark("done", key)
    return key


@app.task
async def stops_loop(key: str) -> str:
    """Stop the pool's event loop, as a task's code may (issue 29); mark the end."""
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.1)
    await _mark("done", key)
    return key
