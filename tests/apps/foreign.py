"""An app for the foreign-data tests: a worker serves a plain queue (``other``),
a queue with a schedule (``timed``) and a queue of broadcasts (``news``); the
broker comes from MINITASK_BROKER_URL.

``mark(token)`` pushes its token on ``marks:other``: the tests assert that the
worker keeps running tasks of ``other`` whatever is planted in the other keys.
``nap(token)`` does too, but only on its second delivery: the first sleeps.
"""
from __future__ import annotations

import os
import time
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

    @app.task(queue="other", name="nap")
    def nap(token: str) -> None:
        """Sleep for an hour on the first delivery (a worker killed meanwhile leaves its
        lease behind), then say this task ran as ``mark`` does."""
        with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
            if client.set(f"napped:{token}", 1, nx=True):
                time.sleep(3600)
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
