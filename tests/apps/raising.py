"""An app whose tasks raise what a task should never raise (KeyboardInterrupt, SystemExit,
a BaseException of their own), as ``async def`` and as plain functions, and one whose
coroutine blocks the event loop past its timeout; the broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import time

from minitask import Minitask

app = Minitask("raising")


class Mine(BaseException):
    """A BaseException of the task's own."""


@app.task(retries=0, name="async_interrupt")
async def async_interrupt() -> None:
    raise KeyboardInterrupt("from an async task")


@app.task(retries=0, name="async_exit")
async def async_exit() -> None:
    raise SystemExit(3)


@app.task(retries=0, name="async_mine")
async def async_mine() -> None:
    raise Mine("of its own")


@app.task(retries=0, name="plain_interrupt")
def plain_interrupt() -> None:
    raise KeyboardInterrupt("from a plain task")


@app.task(retries=0, name="plain_exit")
def plain_exit() -> None:
    raise SystemExit(4)


@app.task(retries=0, timeout=0.3, name="blocks_the_loop")
async def blocks_the_loop() -> str:
    time.sleep(0.8)  # never yields: the loop cannot cancel it at its timeout
    return "finished late"


@app.task(name="double")
async def double(x: int) -> int:
    return 2 * x
