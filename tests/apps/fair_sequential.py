"""An app for the strict order of a group_max_running=1 group across a retry, on workers
that fetch several tasks at a time; the broker comes from MINITASK_BROKER_URL.

``ordered`` records its start and end in ``seq:log:<group>``; task 0 of a group fails
its first attempt (retried a second later); ``slow`` keeps a worker's slot busy."""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask, current_task

app = Minitask("seq", visibility_timeout=30)

_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


@app.task(group_by="group", group_max_running=1, retries=3, retry_backoff=1.0,
          retry_backoff_max=1.0)
def ordered(group: str, n: int) -> None:
    """Record ``start:<n>:<attempt>`` and ``end:<n>:<attempt>:<ok|failed>``."""
    context = current_task()
    assert context is not None
    client = _client()
    client.rpush(f"seq:log:{group}", f"start:{n}:{context.attempt}")
    time.sleep(0.05)
    if n == 0 and context.attempt == 1:
        client.rpush(f"seq:log:{group}", f"end:{n}:{context.attempt}:failed")
        raise RuntimeError(f"{group}:{n} fails its first attempt")
    client.rpush(f"seq:log:{group}", f"end:{n}:{context.attempt}:ok")


@app.task(ignore_result=True)
def slow(seconds: float) -> None:
    """Keep the worker's slot busy."""
    time.sleep(seconds)
