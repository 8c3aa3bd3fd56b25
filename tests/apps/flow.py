"""An app for flow control tests (guide/flow-control); the broker comes from MINITASK_BROKER_URL.

Tasks record when they start and end (``time.time()``, taken as their first and
last line) in Redis lists under ``flow:``, so tests can check limits from the
timestamps alone. Rate-limited tasks also record when the fetch admitted them (ms on
the Redis clock, from the limiter's own start records): a first line lags its
admission by the hand-over to the task, which a loaded machine stretches.
"""
from __future__ import annotations

import os
import time
from typing import Optional

import redis

from minitask import Minitask, current_task
from minitask.broker.keys import QueueKeys

app = Minitask("flow", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


def _client() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


def _record(key: str, *parts: object) -> None:
    client = _client()
    client.rpush(f"flow:{key}", ":".join(str(part) for part in parts))
    client.close()


def _record_start(key: str, started: float, *parts: object,
                  limit_key: Optional[str] = None) -> None:
    """Record a rate-limited start: its first line, the parts, and when the fetch
    admitted it ('' if the record was trimmed: a hand-over of over a window)."""
    context = current_task()
    assert context is not None
    limiter = f"{len(context.name)}:{context.name}"
    if limit_key is not None:
        limiter += f":{limit_key}"
    client = _client()
    starts = client.zrange(QueueKeys("flow", "default").flow_prefix + limiter + ":starts",
                           0, -1)
    client.close()
    admitted = next((member.split(b":")[0].decode() for member in starts
                     if member.partition(b":")[2].decode() == context.id), "")
    _record(key, repr(started), *parts, admitted)


@app.task(rate_limit="20/s")
def paced(n: int) -> int:
    _record_start("paced", time.time(), n)
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
    _record_start("tenant", time.time(), name, n, limit_key=name)  # the test's key
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
