"""Handles refuse a bad task id or wait timeout with a ConfigurationError naming it,
the async twins as their blocking originals do."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import fakeredis
import pytest

from minitask import ConfigurationError, Minitask


def _app(clock: Any) -> Minitask:
    server = fakeredis.FakeServer()
    return Minitask("test", broker=fakeredis.FakeRedis(server=server),
                    async_broker=fakeredis.aioredis.FakeRedis(server=server), clock=clock)


@pytest.mark.parametrize("task_id", [None, 123, "", b"abc", "a\nb"])
def test_app_handle_refuses_a_task_id_that_is_not_printable_text(
        clock: Any, task_id: Any) -> None:
    app = _app(clock)
    with pytest.raises(ConfigurationError, match=r"app.handle\(\): task_id"):
        app.handle(task_id)


@pytest.mark.parametrize("timeout", [float("nan"), "x", True, [1]])
def test_aget_refuses_a_timeout_as_get_does(clock: Any, timeout: Any) -> None:
    app = _app(clock)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(1, 2)
    with pytest.raises(ConfigurationError, match=r"get\(\) on task .*timeout must be"):
        handle.get(timeout=timeout)

    async def follow(wait: Callable[..., Any]) -> Any:
        # a NaN deadline would never pass: bounded, so a regression fails, not hangs
        return await asyncio.wait_for(wait(timeout=timeout), 5)

    with pytest.raises(ConfigurationError, match=r"aget\(\) on task .*timeout must be"):
        asyncio.run(follow(handle.aget))
