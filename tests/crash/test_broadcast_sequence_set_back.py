"""A broadcast sequence set back below the subscribers' cursors (by hand, or planted)
loses no call: the next send starts it again above every cursor and logged call, and
a real worker on each pool runs the call (it took the call for one it had pulled, and
the call never ran: join() said it never would)."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
NEWS = queue_keys("foreign", "news")


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
@pytest.mark.parametrize("planted", ["1", "0"])
def test_a_sequence_set_back_below_the_cursors_loses_no_call(
        processes: Processes, server: RedisServer, pool: str, planted: str,
        tmp_path: Any) -> None:
    processes.worker("tests.apps.foreign", "-Q", "news", "--pool", pool, "-c", "1",
                     "--name", "sub1", env={"MINITASK_BROKER_URL": server.url},
                     log=tmp_path / "worker.log")
    producer = build(server.url)
    client: "redis.Redis[bytes]" = server.client()
    try:
        hear = producer.tasks["hear"]
        wait_until(lambda: client.hexists(NEWS.broadcast("cursors"), "sub1"),
                   timeout=DEADLINE, message="the worker subscribed")
        for n in (1, 2, 3):
            assert hear.delay(n).join(timeout=DEADLINE) == {"sub1": n}
        client.hset(NEWS.broadcast("state"), "seq", planted)
        assert hear.delay(4).join(timeout=DEADLINE) == {"sub1": 4}
        assert hear.delay(5).join(timeout=DEADLINE) == {"sub1": 5}
        assert int(client.hget(NEWS.broadcast("state"), "seq") or 0) >= 5
    finally:
        producer.close()
        client.close()
