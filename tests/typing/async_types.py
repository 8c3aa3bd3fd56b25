"""assert_type checks for async def tasks (mypy checks this file; pytest ignores it).

An ``# type: ignore[...]`` here marks a call mypy must refuse: with
``warn_unused_ignores`` (strict), an ignore that is not needed is an error.
"""
from __future__ import annotations

from typing import Any, Coroutine, List

from typing_extensions import assert_type

from minitask import AsyncTask, Minitask, Task, TaskHandle

app = Minitask("typing")


@app.task
async def fetch(url: str, retries: int = 1) -> bytes:
    return url.encode() * retries


@app.task(queue="io")
async def count(words: List[str]) -> int:
    return len(words)


@app.task
def add(x: int, y: int) -> int:
    return x + y


def blocking_side() -> None:
    async_task: AsyncTask[..., bytes] = fetch
    plain_task: Task[..., int] = add
    not_async: AsyncTask[..., int] = add  # type: ignore[assignment]
    assert async_task and plain_task and not_async
    assert_type(fetch.delay("u").get(), bytes)
    assert_type(count.delay(["a"]).get(timeout=1), int)
    coroutine = assert_type(fetch("u"), Coroutine[Any, Any, bytes])
    coroutine.close()
    fetch.delay(3)  # type: ignore[arg-type]
    count.apply_in(1.0, "not a list")  # type: ignore[arg-type]


async def async_side() -> None:
    handle = await fetch.adelay("u", retries=2)
    assert_type(handle, TaskHandle[bytes])
    assert_type(await handle.aget(timeout=1), bytes)
    assert_type(await (await add.aapply_in(1.0, 1, 2)).aget(), int)
    assert_type(await count.adelay_many([(["a"],)]), List[TaskHandle[int]])
    assert_type(await handle.astatus(), str)
    assert_type(await handle.acancel(running=True), bool)
    await add.adelay(1, "2")  # type: ignore[arg-type]
