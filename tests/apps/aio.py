"""An asyncio app for subprocess workers in tests; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os
import weakref

import redis.asyncio

from minitask import Minitask, current_task

app = Minitask("aio", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


#: One marker client per event loop (its pool serves every coroutine of that loop): a
#: client of its own for each marker cost two connects and handshakes per task, most
#: of the time the 2,000-coroutine SIGKILL test took (44 s -> about 10 s at load 13).
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis]" = \
    weakref.WeakKeyDictionary()


async def _mark(kind: str, key: str) -> None:
    context = current_task()
    assert context is not None
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # a connection for each coroutine marking at once (redis-py's asyncio pool
        # refuses a 101st by default; the tests run up to 200 at once)
        client = _clients[loop] = redis.asyncio.Redis.from_url(
            os.environ["MINITASK_BROKER_URL"], max_connections=1000)
    await client.rpush(f"marks:{kind}:{key}", f"{context.id}:{context.attempt}:{os.getpid()}")


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
