"""An app whose ``async def`` tasks raise out of the event loop from code they start,
not from their own coroutine (issue 29, probe 29b F3): a child asyncio task or a loop
callback raising KeyboardInterrupt or SystemExit, a ``loop.stop()``, and a child left
behind that raises once its attempt has ended. The broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
from typing import List, NoReturn

from minitask import Minitask

app = Minitask("escaping")

#: The children the tasks start: asyncio keeps only weak references to tasks.
_children: List["asyncio.Task[None]"] = []


def _raise(error: BaseException) -> NoReturn:
    raise error


async def _child(error: BaseException, after: float = 0.0) -> None:
    await asyncio.sleep(after)
    raise error


@app.task(retries=0, name="child_interrupt")
async def child_interrupt() -> str:
    _children.append(asyncio.create_task(_child(KeyboardInterrupt("from a child task"))))
    await asyncio.sleep(5)
    return "parent returned"


@app.task(retries=0, name="child_exit")
async def child_exit() -> str:
    _children.append(asyncio.get_running_loop().create_task(_child(SystemExit(7))))
    await asyncio.sleep(5)
    return "parent returned"


@app.task(retries=0, name="callback_interrupt")
async def callback_interrupt() -> str:
    asyncio.get_running_loop().call_soon(_raise, KeyboardInterrupt("from a callback"))
    await asyncio.sleep(5)
    return "parent returned"


@app.task(retries=0, name="stops_loop")
async def stops_loop() -> str:
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.5)
    return "parent returned"


@app.task(retries=0, name="leaves_child")
async def leaves_child() -> str:
    """Returns at once; its child raises 0.3 s later, when its attempt has ended."""
    _children.append(asyncio.create_task(_child(KeyboardInterrupt("left behind"), 0.3)))
    return "parent returned"


async def _stop_later(after: float) -> None:
    await asyncio.sleep(after)
    asyncio.get_running_loop().stop()


@app.task(retries=0, name="leaves_stopper")
async def leaves_stopper() -> str:
    """Returns at once; its child stops the loop 0.3 s later, its attempt ended."""
    _children.append(asyncio.create_task(_stop_later(0.3)))
    return "parent returned"


@app.task(name="double")
async def double(x: int) -> int:
    await asyncio.sleep(0.01)
    return 2 * x
