"""The asyncio pool records plain successes from its event loop (worker/loop_acks.py):
its connections killed again and again while it drains (CLIENT KILL, as a failover or
a proxy would) lose no task and leave nothing leased; the recording threads take over
each outcome whose round trip failed, as they ride any outage."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.worker import loop_acks
from tests.support.servers import RedisServer

#: Longest the test waits for the worker to serve every task, kills and all; and for
#: it to stop: within the test's timeout, so that a failure says what it waited for.
DEADLINE = 200.0
STOP_WAIT = 60.0
TASKS = 300


@pytest.mark.timeout(300)  # each kill costs the drain most of a second; 31 s alone
def test_connections_killed_mid_drain_lose_no_outcome(
        start_redis: Callable[..., RedisServer], monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_redis()
    exchange = loop_acks.LoopLink.exchange
    round_trips: List[int] = []  # one a round trip the loop began (the path under test)

    async def counted(self: loop_acks.LoopLink, packed: bytes) -> Any:
        round_trips.append(1)
        return await exchange(self, packed)

    monkeypatch.setattr(loop_acks.LoopLink, "exchange", counted)
    app = Minitask("loopkills", broker=server.url)

    @app.task
    async def double(index: int) -> int:
        return 2 * index

    serving = threading.Event()
    app.on("worker_ready", lambda worker: serving.set())
    handles = [double.delay(index) for index in range(TASKS)]
    killer = redis.Redis.from_url(server.url)
    worker = app.worker(pool="asyncio", concurrency=4)
    thread = threading.Thread(target=worker.run, daemon=True)
    kills = 0
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE
        # killed from when it serves: one killed as it starts stops it (a worker that
        # cannot reach Redis at start exits, code 3), and the drain, served by nobody,
        # was waited for until the test's timeout
        while not serving.wait(0.1):
            assert thread.is_alive() and time.monotonic() < deadline, "the worker never served"
        keys = queue_keys("loopkills", "default")
        while sum(killer.llen(ready) for ready in keys.ready) or killer.zcard(keys.leases):
            assert thread.is_alive(), "the worker stopped while it drained"
            assert time.monotonic() < deadline, "the tasks were not all served in time"
            if kills < 40:
                kills += int(killer.client_kill_filter(_type="normal", skipme=True) or 0) > 0
            time.sleep(0.02)
        results = [handle.get(timeout=max(0.1, deadline - time.monotonic()))
                   for handle in handles]
    finally:
        worker.stop()
        thread.join(timeout=STOP_WAIT)
        app.close()
    assert not thread.is_alive()
    assert kills > 0, "the connections were meant to be killed while it drained"
    assert round_trips, "no outcome went through the loop: the loop's path was not tested"
    assert results == [2 * index for index in range(TASKS)]
    assert killer.zcard(keys.leases) == 0
    killer.close()
