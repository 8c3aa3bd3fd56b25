"""A send that wrote nothing names the task as well as the queue (trial34: "could not
enqueue into queue 'default' ..." said which queue, not which task), on ``delay()``,
``delay_many()`` and ``adelay()``."""
from __future__ import annotations

import asyncio

import pytest

from minitask import BrokerError, Minitask


@pytest.mark.app("unreachable", on="offline")
def test_a_send_that_could_not_reach_redis_names_the_task(app: Minitask) -> None:
    @app.task(name="shop.add")
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(BrokerError) as one:
        add.delay(1, 2)
    assert str(one.value).startswith(
        "could not enqueue task 'shop.add' into queue 'default' (broker "), str(one.value)
    assert not one.value.sent and one.value.reason == "unreachable"
    with pytest.raises(BrokerError) as many:
        add.delay_many([(1, 2), (3, 4), (5, 6)])
    assert str(many.value).startswith(
        "could not enqueue task 'shop.add' (and 2 other task(s) of the call) into queue "
        "'default' (broker "), str(many.value)

    async def asend() -> None:
        try:
            await add.adelay(1, 2)
        finally:
            await app.aclose()
    with pytest.raises(BrokerError) as awaited:
        asyncio.run(asend())
    assert str(awaited.value).startswith(
        "could not enqueue task 'shop.add' into queue 'default' (broker "), str(awaited.value)
