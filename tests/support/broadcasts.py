"""A broadcast app for tests that plant data in a broadcast queue's keys."""
from __future__ import annotations

import time
from typing import Any, Tuple

from minitask import Minitask
from tests.support.servers import RedisServer


def now_ms() -> int:
    """The wall clock (ms), as a worker's heartbeat gives it."""
    return int(time.time() * 1000)


def tick_app(redis_server: RedisServer, name: str, queue: str) -> Tuple[Minitask, Any]:
    """App ``name`` on ``redis_server`` and its task ``tick(n) -> n``, broadcast on
    ``queue``."""
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=queue)
    def tick(n: int) -> int:
        return n

    return app, tick
