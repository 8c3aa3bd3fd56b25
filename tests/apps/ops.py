"""An app for the operators' view tests (inspect running|scheduled|recent, cancel
--running, hide_args, worker names); the broker comes from MINITASK_BROKER_URL and
the record's length from TEST_RECENT (default: the app's default)."""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Dict

import redis

from minitask import Minitask, Retry, current_task

_options: Dict[str, Any] = {}
if "TEST_RECENT" in os.environ:
    _options["recent_outcomes"] = int(os.environ["TEST_RECENT"])
app = Minitask("ops", **_options)


def _client() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


def _started(key: str) -> None:
    context = current_task()
    assert context is not None
    client = _client()
    client.rpush(f"marks:started:{key}", context.id)
    client.close()


@app.task(name="ops.add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="ops.hold")
def hold(key: str) -> str:
    """Mark the start, then wait (at most a minute) for a token on marks:release."""
    _started(key)
    client = _client()
    deadline = time.monotonic() + 60
    # a second at a time: under the client's socket timeout
    while time.monotonic() < deadline and client.blpop(["marks:release"], timeout=1) is None:
        pass
    client.close()
    return key


@app.task(name="ops.long")
def long(key: str) -> str:
    """Mark the start, then run for a minute unless stopped: the process pool kills it,
    the thread pool asks it (``cancel_requested``), checked ten times a second."""
    _started(key)
    context = current_task()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if context is not None and context.cancel_requested:
            return "stopped"
        time.sleep(0.1)
    return key


@app.task(name="ops.along")
async def along(key: str) -> str:
    """The asyncio pool's long task: cancelled at its await."""
    _started(key)
    await asyncio.sleep(60)
    return key


@app.task(name="ops.flaky", retries=1, retry_backoff=0.01)
def flaky() -> None:
    raise Retry(delay=0)


@app.task(name="ops.login", hide_args=True)
def login(user: str, password: str) -> None:
    raise PermissionError(f"user {user} may not log in")


@app.task(name="ops.steps")
def steps(key: str, total: int) -> int:
    """Report progress 1 of ``total``, then one more step per token on marks:step
    (each wait at most a minute), marking the start."""
    _started(key)
    context = current_task()
    assert context is not None
    client = _client()
    for done in range(1, total + 1):
        context.set_progress(done, total, f"step {done}")
        if done < total:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and client.blpop(["marks:step"],
                                                               timeout=1) is None:
                pass
    client.close()
    return total
