"""An app for the scale tests' subprocess workers, on any broker URL.

The broker comes from ``MINITASK_BROKER_URL`` (a cluster, a Sentinel service,
TLS...), the app name from ``TEST_APP`` (each test its own, so tests sharing a
cluster never see each other's keys). Tasks leave markers on a separate plain
Redis named by ``TEST_MARKS_URL``: markers must survive what the test does to
the broker (a failover, a resharding). ``TEST_DURABILITY`` sets the app's
durability (its outcomes then wait for replicas).
"""
from __future__ import annotations

import os
import time
from typing import Any

import redis

from minitask import Minitask, current_task

app = Minitask(os.environ.get("TEST_APP", "scale"),
               visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")),
               durability=os.environ.get("TEST_DURABILITY") or None)


def mark(kind: str, key: str) -> None:
    context = current_task()
    assert context is not None
    with redis.Redis.from_url(os.environ["TEST_MARKS_URL"]) as client:
        client.rpush(f"marks:{kind}:{key}",
                     f"{context.id}:{context.attempt}:{os.getpid()}:{context.delivery}")


@app.task
def record(key: str) -> str:
    mark("done", key)
    return key


@app.task
def slow(key: str, seconds: float) -> str:
    mark("started", key)
    time.sleep(seconds)
    mark("done", key)
    return key


@app.task(retries=2, retry_backoff=0.01)
def flaky(key: str) -> Any:
    """Fails its first attempt, succeeds on the second."""
    mark("started", key)
    if current_task().attempt == 1:  # type: ignore[union-attr]
        raise ValueError(f"first attempt of {key} fails")
    mark("done", key)
    return "second attempt"


@app.task(retries=1, retry_backoff=0.01)
def doomed(key: str) -> None:
    """Fails every attempt: ends in the dead letters."""
    mark("started", key)
    raise RuntimeError(f"{key} always fails")
