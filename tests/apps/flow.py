"""An app for flow control tests (SPEC 11); the broker comes from MINITASK_BROKER_URL.

Tasks record when they start and end (``time.time()``, taken as their first and
last line) in Redis lists under ``flow:``, so tests can check limits from the
timestamps alone.
"""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask, current_task

app = Minitask("flow", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


def _client() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


def _record(key: str, *parts: object) -> None:
    client = _client()
    client.rpush(f"flow:{key}", ":".join(str(part) for part in parts))
    client.close()


@app.task(rate_limit="20/s")
def paced(n: int) -> int:
    _record("paced", repr(time.time()), n)
    return n


@app.task
def plain(n: int) -> int:
    _record("plain", repr(time.time()), n)
    return n


@app.task(max_running=2)
def held(n: int, seconds: float) -> int:
    started = time.time()
    context = current_task()
    assert context is not None
    _record("held:start", repr(started), context.id, os.getpid())
    time.sleep(seconds)
    _record("held:end", repr(time.time()), context.id, os.getpid())
    return n


@app.task(rate_limit="5/s")
def tenant(name: str, n: int) -> int:
    _record("tenant", repr(time.time()), name, n)
    return n


@app.task(rate_limit="2/m")
def rare(n: int) -> int:
    _record("rare", repr(time.time()), n)
    return n


@app.task
def digest(value: int) -> int:
    _record("digest", repr(time.time()), value)
    return value


@app.task
def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@app.task
def quick(n: int) -> int:
    _record("quick", repr(time.time()), n)
    return n
