"""A poisoned task whose burial keeps failing is tried again after a growing wait,
said seldom, while the queue's other tasks run (probe35 M1).

A failed burial left the task's lease expired, the next event of every fetch: the
worker fetched again at once, the fetch reported it again, the burial failed again,
about 1,000 ERROR lines a second and a core busy for ever. Its lease is now pushed
ahead by the wait (1 s, 2 s, ... 30 s), its band kept, and the line said at most once
a minute per queue. The burial is made to fail here whatever it meets; the worker
runs for a bounded window. On a real redis-server."""
from __future__ import annotations

import logging
import threading
import time
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from minitask.worker import Worker
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: How long the worker runs after the plain task is done (s): a few waits at most.
WINDOW = 3.0


def test_a_failing_burial_is_held_back_and_said_seldom(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    tried: List[str] = []

    def never(host: object, queue: str, task_id: str, trims: object = None) -> object:
        tried.append(task_id)
        raise BrokerError("Connection closed by server (as the test has it)")

    monkeypatch.setattr("minitask.worker.sources.bury_poisoned", never)
    app = Minitask("buryback", broker=redis_server.url, max_deliveries=5)
    rec = app.task(name="rec")(lambda tag: tag)
    keys = QueueKeys("buryback", "default")
    poisoned = rec.delay("boom").id
    admin.delete(*keys.ready)  # as a fetch leaves it: leased (expired), delivered 5 times
    admin.zadd(keys.leases, {poisoned: 3})  # band 3: priority 6
    admin.hset(keys.deliveries, poisoned, 5)
    plain = rec.delay("fine")
    worker = Worker(app, ["default"], concurrency=1)
    running = threading.Thread(target=worker.run, daemon=True)
    try:
        with caplog.at_level(logging.ERROR, logger="minitask"):
            running.start()
            deadline = time.monotonic() + 30
            while plain.status() != "succeeded" and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(WINDOW)
            worker.stop()
            running.join(timeout=30)
        assert not running.is_alive()
        assert plain.status() == "succeeded"
        assert 1 <= len(tried) < 20, len(tried)  # (thousands before)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(said) < 5, said
        assert "could not dead-letter poisoned task" in said[0] and "1 s" in said[0], said
        score = admin.zscore(keys.leases, poisoned)  # still leased: nothing lost
        assert score is not None and int(score) % 10 == 3  # held back, its band kept
        assert score > 10 * (time.time() * 1000 - 5000)
    finally:
        worker.stop()
        running.join(timeout=30)
        app.close()
