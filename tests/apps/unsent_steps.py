"""An app for cancelling workflow steps not sent yet (a chord's body, a chain's later
step); the broker comes from MINITASK_BROKER_URL. Its tasks say in that Redis that
they started (``held``) and that they ran (``noted``)."""
from __future__ import annotations

import os
import time
from typing import Any

import redis

from minitask import Minitask

app = Minitask("unsent")

#: How long ``held`` waits for its gate at most (s): past any test's deadline.
HELD_MOST = 120.0


def _client() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])


@app.task(name="held")
def held(gate: str) -> int:
    """Say it started (list ``started:<gate>``), then wait until the test opens its gate
    (key ``open:<gate>``)."""
    client = _client()
    try:
        client.rpush(f"started:{gate}", 1)
        deadline = time.monotonic() + HELD_MOST
        while not client.exists(f"open:{gate}") and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        client.close()
    return 1


@app.task(name="noted")
def noted(value: Any, name: str) -> Any:
    """Say it ran (list ``ran``: ``name``); return ``value``."""
    client = _client()
    try:
        client.rpush("ran", name)
    finally:
        client.close()
    return value


@app.task(name="quick")
def quick() -> int:
    return 1
