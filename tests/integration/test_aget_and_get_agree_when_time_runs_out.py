"""``aget(timeout=0)`` and ``get(timeout=0)`` on the same handle say the same (probe29r
L6): ``get`` named the task's status and "no live worker serves queue 'default'", while
``aget`` said "(where it is was not read: no time was left ...)": its look at where the
task is had 0.1 s past the deadline, which its one wait for the result (about 0.1 s,
the waits' glance) had used up. The twins are run against each other, on the suite's
redis-server with no worker, each first call cold (a fresh app: connections, scripts)."""
from __future__ import annotations

import asyncio
from typing import List

import pytest

from minitask import Minitask
from minitask.errors import ResultTimeout
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TRIES = 4


def said_by_get(app: Minitask, task_id: str) -> str:
    with pytest.raises(ResultTimeout) as raised:
        app.handle(task_id).get(timeout=0)
    return str(raised.value)


async def said_by_aget(app: Minitask, task_id: str) -> List[str]:
    said = []
    try:
        for _ in range(TRIES):
            with pytest.raises(ResultTimeout) as raised:
                await app.handle(task_id).aget(timeout=0)
            said.append(str(raised.value))
    finally:
        await app.aclose()
    return said


@pytest.mark.parametrize("first", ["aget", "get"])
def test_aget_and_get_with_no_time_say_the_same_of_a_queued_task(
        redis_server: RedisServer, admin: object, first: str) -> None:
    producer = Minitask("twins", broker=redis_server.url)

    @producer.task(name="add")
    def add(x: int) -> int:
        return x

    task_id = add.delay(1).id
    app = Minitask("twins", broker=redis_server.url)  # cold: nothing read nor loaded yet
    if first == "aget":
        asynced = asyncio.run(said_by_aget(app, task_id))
        synced = said_by_get(app, task_id)
    else:
        synced = said_by_get(app, task_id)
        asynced = asyncio.run(said_by_aget(app, task_id))
    assert "it is still queued: no live worker serves queue 'default'" in synced, synced
    assert asynced == [synced] * TRIES
    producer.close()
    app.close()
