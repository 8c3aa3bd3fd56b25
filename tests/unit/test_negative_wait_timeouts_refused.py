"""A negative wait timeout is refused with a ConfigurationError naming it, by every wait
and its async twin alike: ``get(timeout=-1)`` used to poll once and answer "did not
finish within -1 s" (or the value, had the task ended), which no caller means."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List

import fakeredis
import pytest

from minitask import ConfigurationError, Minitask, ResultTimeout, group


def _app(clock: Any) -> Minitask:
    server = fakeredis.FakeServer()
    return Minitask("test", broker=fakeredis.FakeRedis(server=server),
                    async_broker=fakeredis.aioredis.FakeRedis(server=server), clock=clock)


def _refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("timeout", [-1, -0.001, float("-inf")])
def test_get_and_aget_refuse_a_negative_timeout_alike(clock: Any, timeout: float) -> None:
    app = _app(clock)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(1, 2)

    async def follow() -> Any:  # bounded: a regression fails, not hangs
        return await asyncio.wait_for(handle.aget(timeout=timeout), 5)

    said = _refusal(lambda: handle.get(timeout=timeout))
    asaid = _refusal(lambda: asyncio.run(follow()))
    assert f"get() on task {handle.id}: timeout must be" in said
    assert "0 or more" in said and repr(timeout) in said
    assert asaid == said.replace("get()", "aget()", 1)  # the twins say the same


def test_zero_waits_no_longer_than_one_look(clock: Any) -> None:
    app = _app(clock)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(1, 2)
    with pytest.raises(ResultTimeout):
        handle.get(timeout=0)


def test_group_and_broadcast_waits_refuse_a_negative_timeout(clock: Any) -> None:
    app = _app(clock)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(broadcast=True, queue="fan")
    def reload() -> None:
        return None

    app.worker(queues=["fan"], subscriber="a").starting()  # a subscriber the call goes to
    handles: List[Any] = [group(add.s(1, 2), add.s(3, 4)).delay(), reload.delay()]
    for handle in handles:
        said = _refusal(lambda: handle.get(timeout=-1))
        assert "timeout must be" in said and "0 or more" in said, said
    said = _refusal(lambda: handles[1].join(timeout=-1))
    assert "timeout must be" in said and "0 or more" in said, said
