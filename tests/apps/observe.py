"""An app for the observability tests' subprocess workers (broker from
MINITASK_BROKER_URL): tasks that succeed, fail, retry, and report progress."""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask, current_task

app = Minitask("observe", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "3")))


def _client() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


@app.task
def ok(index: int) -> int:
    """Takes a little while, so that two workers both get some; notes which worker
    (the parent of a process pool child) ran it."""
    time.sleep(0.02)
    client = _client()
    client.rpush("marks:workers", os.getppid())
    client.close()
    return index


@app.task(retries=1, retry_backoff=0.01, retry_backoff_max=0.01, retry_on=(ValueError,))
def bad(index: int) -> None:
    raise ValueError(f"bad {index}")


@app.task
def count_up(n: int, release: str) -> int:
    """set_progress n times in a tight loop, note how long the loop took, then wait
    (blocking on Redis) until the test releases it."""
    context = current_task()
    assert context is not None
    client = _client()
    started = time.monotonic()
    for i in range(1, n + 1):
        context.set_progress(i, n, "counting")
    client.rpush("marks:loop_seconds", repr(time.monotonic() - started))
    client.blpop([release], timeout=120)
    client.close()
    return n
