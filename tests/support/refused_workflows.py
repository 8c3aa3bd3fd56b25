"""What the tests of workflows refused before their first write share: an app with a
task in a second queue, and the key set they compare before and after."""
from __future__ import annotations

from typing import Any, List, Set

from minitask import Minitask
from tests.support.servers import RedisServer


def two_queue_app(name: str, broker: Any) -> Minitask:
    """An app ``name`` on ``broker``: ``add(x, y=0)`` and ``total(values)`` in queue
    ``default``, ``ping(n)`` in queue ``other``."""
    app = Minitask(name, broker=broker)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task(name="ping", queue="other")
    def ping(n: int) -> int:
        return n

    @app.task(name="total")
    def total(values: List[int]) -> int:
        return sum(values)

    return app


def key_set(redis_server: RedisServer) -> Set[bytes]:
    """Every key ``redis_server`` holds."""
    return set(redis_server.client().keys("*"))
