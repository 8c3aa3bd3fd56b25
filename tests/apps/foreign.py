"""An app for the foreign-data tests: a worker serves a plain queue (``other``),
a queue with a schedule (``timed``) and a queue of broadcasts (``news``); the
broker comes from MINITASK_BROKER_URL.

``mark(token)`` pushes its token on ``marks:other``: the tests assert that the
worker keeps running tasks of ``other`` whatever is planted in the other keys.
"""
from __future__ import annotations

import os
from typing import Any

import redis

from minitask import Minitask


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the tests build it too."""
    app = Minitask("foreign", broker=broker,
                   visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))

    @app.task(queue="other", name="mark")
    def mark(token: str) -> None:
        """Say this task ran."""
        with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
            client.rpush("marks:other", token)

    @app.periodic(every=3600.0, queue="timed", name="hourly")
    def hourly() -> None:
        """A schedule whose keys the tests plant data in."""

    @app.task(queue="news", broadcast=True, name="hear")
    def hear(n: int) -> int:
        """A broadcast task whose keys the tests plant data in."""
        return n

    return app


app = build()
