"""An app for drain measurements (tools/pool_drain.py) and the pools' round-trip
tests; the broker comes from MINITASK_BROKER_URL.

``incr`` makes one Redis call of its own (an INCR on the broker), as the tasks of
the drain comparisons with other queues do; ``noop`` and ``anoop`` do nothing.
"""
from __future__ import annotations

import os
import threading

import redis

from minitask import Minitask

app = Minitask("drain")

_local = threading.local()


def _client() -> "redis.Redis[bytes]":
    client = getattr(_local, "client", None)
    if client is None or getattr(_local, "pid", None) != os.getpid():
        client = _local.client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
        _local.pid = os.getpid()
    return client


@app.task(ignore_result=True)
def incr(index: int) -> None:
    _client().incr("drain:count")


@app.task(ignore_result=True)
def noop(index: int) -> None:
    """Nothing: measures the worker, not the task."""


@app.task(ignore_result=True)
async def anoop(index: int) -> None:
    """Nothing, as a coroutine: the asyncio pool awaits it on its loop."""
