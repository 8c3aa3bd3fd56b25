"""An app whose outcomes meet keys of another type (issue 29, H1 and M1): a task that
fails for good, one that fails its first attempt, a canary on its own queue, and a
fair task whose group is limited. The broker comes from MINITASK_BROKER_URL;
``producer(broker)`` builds the same app on a test's side, for sending.
"""
from __future__ import annotations

import os
from typing import Any

import redis

from minitask import Minitask

_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


def doomed() -> None:
    raise ValueError("always")


def flaky(key: str) -> str:
    """Fails its first attempt (counted in Redis under ``key``), then returns ``key``."""
    if _client().incr(key) == 1:
        raise ValueError("first attempt")
    return key


def ping(n: int) -> int:
    return n


def tenant_task(tenant: str, n: int) -> int:
    return n


def _register(app: Minitask) -> Minitask:
    app.task(name="aside.doomed", queue="base", retries=0)(doomed)
    app.task(name="aside.flaky", queue="base", retries=2, retry_backoff=0.1,
             retry_backoff_max=0.2)(flaky)
    app.task(name="aside.ping", queue="canary")(ping)
    app.task(name="aside.tenant_task", queue="fair2", group_by="tenant", group_max_running=1,
             group_rate_limit="100/s")(tenant_task)
    return app


def producer(broker: Any) -> Minitask:
    return _register(Minitask("aside", broker=broker))


app = _register(Minitask("aside"))
