"""An app whose ``async def`` tasks leave things running when their attempt is over (an
asyncio task that swallows its cancellation, a call in the loop's default executor),
one that ignores the cancellation of its time limit, and a plain one that starts a
thread that is not a daemon; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import redis

from minitask import Minitask

app = Minitask("leftovers")


def producer(broker: Any) -> Minitask:
    """This app's tasks, with their options, on ``broker``: the tests' side of it."""
    made = Minitask("leftovers", broker=broker)
    for task in app.tasks.values():
        made.task(name=task.name, retries=task.options.retries,
                  timeout=task.options.timeout)(task.func)
    return made


#: Never set: what the leftovers wait on (far longer than any test).
NEVER = threading.Event()


async def _stubborn() -> None:
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass  # swallowed: it never ends


@app.task(retries=0, name="leaves_stubborn")
async def leaves_stubborn() -> str:
    asyncio.get_running_loop().create_task(_stubborn())
    await asyncio.sleep(0)
    return "returned"


@app.task(retries=0, timeout=0.5, name="ignores_cancel")
async def ignores_cancel() -> str:
    await _stubborn()
    return "never"


@app.task(retries=0, timeout=5, name="leaves_executor_call")
async def leaves_executor_call() -> str:
    asyncio.get_running_loop().run_in_executor(None, NEVER.wait, 600)
    return "returned"


@app.task(retries=0, name="leaves_thread")
def leaves_thread() -> str:
    threading.Thread(target=NEVER.wait, args=(600,), name="left-by-a-task",
                     daemon=False).start()
    return "returned"


@app.task(name="double")
async def double(x: int) -> int:
    return 2 * x


@app.task(name="plain_double")
def plain_double(x: int) -> int:
    return 2 * x


#: Set by ``blocks`` once it runs: its thread exists from then on.
BLOCKS_STARTED = "leftovers:blocks:started"


@app.task(retries=0, name="blocks")
def blocks() -> None:
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    client.set(BLOCKS_STARTED, 1)
    client.close()
    NEVER.wait(600)  # a plain function nothing can stop
