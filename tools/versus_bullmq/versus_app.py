"""The minitask side of tools/versus_bullmq/run.py: the app its workers load with
``-A versus_app:app`` (this folder and the checkout under test on PYTHONPATH), the
broker from MINITASK_BROKER_URL.

``incr`` makes one Redis INCR on a client of its own, as the BullMQ job does;
``noop`` does nothing; ``aincr`` and ``anoop`` are the same as coroutines, for the
asyncio pool. Every task ignores its result (BullMQ's jobs are removed on completion).
"""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Dict

import redis
import redis.asyncio

from minitask import Minitask

app = Minitask("versus")

_local = threading.local()
_loops: Dict[int, Any] = {}


def _client() -> "redis.Redis[bytes]":
    """One client per thread (the thread pool) and per process (the process pool)."""
    client = getattr(_local, "client", None)
    if client is None or getattr(_local, "pid", None) != os.getpid():
        client = _local.client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
        _local.pid = os.getpid()
    return client


def _async_client() -> Any:
    """One asyncio client per event loop."""
    loop = id(asyncio.get_running_loop())
    client = _loops.get(loop)
    if client is None:
        client = _loops[loop] = redis.asyncio.Redis.from_url(
            os.environ["MINITASK_BROKER_URL"])
    return client


@app.task(ignore_result=True)
def incr(index: int) -> None:
    _client().incr("versus:count")


@app.task(ignore_result=True)
def noop(index: int) -> None:
    """Nothing: measures the worker, not the task."""


@app.task(ignore_result=True)
async def aincr(index: int) -> None:
    await _async_client().incr("versus:count")


@app.task(ignore_result=True)
async def anoop(index: int) -> None:
    """Nothing, as a coroutine."""
