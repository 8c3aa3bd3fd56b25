"""A chord whose group can never complete (a fired mark no minitask wrote, planted while
its members run) ends its body, naming the group, on every pool: the body stayed
"unknown" for ever and nothing was logged."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask import TaskFailed, chord
from tests.apps.canvas import producer
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_planted_fired_mark_ends_the_chord_body(
        processes: Processes, server: RedisServer, pool: str, tmp_path: Any) -> None:
    processes.worker("tests.apps.canvas", "--pool", pool, "-c", "2",
                     env={"MINITASK_BROKER_URL": server.url}, log=tmp_path / "worker.log")
    app = producer(server.url)
    client: "redis.Redis[bytes]" = server.client()
    try:
        member, total = app.tasks["canvas.member"], app.tasks["canvas.total"]
        handle = chord([member.s("a", 1, pause=1.0), member.s("b", 2, pause=1.0)],
                       total.s()).delay()
        [group] = [key for key in client.keys("minitask:{canvas:*}:group:*")
                   if not key.endswith(b":results")]
        client.hset(group, "fired", "x")
        with pytest.raises(TaskFailed, match="the group cannot complete"):
            handle.get(timeout=DEADLINE)
        wait_until(lambda: len(app.dead_letters()) == 2, timeout=DEADLINE,
                   message="both members dead-lettered, naming the group")
        # the worker goes on
        assert app.tasks["canvas.add"].delay(1, 2).get(timeout=DEADLINE) == 3
    finally:
        app.close()
        client.close()
