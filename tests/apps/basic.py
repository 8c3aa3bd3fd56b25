"""An app for subprocess workers in tests; the broker comes from MINITASK_BROKER_URL.

Tasks leave markers in Redis (keys under ``marks:``) so tests can see what ran,
how often and on which attempt, without reading logs.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

import redis

from minitask import Minitask, current_task

app = Minitask("basic", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")),
               max_deliveries=int(os.environ.get("TEST_MAX_DELIVERIES", "5")))


def _marks() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


def _mark(kind: str, key: str) -> None:
    context = current_task()
    assert context is not None
    client = _marks()
    client.rpush(f"marks:{kind}:{key}",
                 f"{context.id}:{context.attempt}:{os.getpid()}:{context.delivery}")
    client.close()


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def record(key: str) -> str:
    """Mark that it started and finished."""
    _mark("done", key)
    return key


@app.task
def slow(key: str, seconds: float) -> str:
    """Mark the start, sleep, mark the end: lets a test act while it runs."""
    _mark("started", key)
    time.sleep(seconds)
    _mark("done", key)
    return key


@app.task
def poison(key: str) -> None:
    """Kills its own worker process, the way a segfault or the OOM killer would."""
    _mark("started", key)
    os._exit(9)


@app.task(timeout=1.0)
def runaway(key: str) -> None:
    _mark("started", key)
    while True:
        pass


@app.task(timeout=1.0, retries=1, retry_backoff=0.01)
def runaway_retried(key: str) -> Any:
    _mark("started", key)
    if current_task().attempt == 1:  # type: ignore[union-attr]
        while True:
            pass
    _mark("done", key)
    return "second attempt"


@app.task
def fail(message: str) -> None:
    """Ends dead at once: not retried."""
    raise ValueError(message)


@app.task
def chatty(text: str) -> str:
    """Logs from inside the task, through a logger of its own."""
    logging.getLogger("tests.apps.chatty").warning("chatty says %s", text)
    return text


@app.task
def interrupt(key: str) -> None:
    """Raise what Ctrl-C would, from inside the task: a failure of this attempt only."""
    _mark("started", key)
    raise KeyboardInterrupt(key)
