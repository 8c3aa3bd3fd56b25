"""An app whose tasks hold a ``max_running`` or ``group_max_running`` slot until the
test says so (issue 29: a slot set lost while held); the broker comes from
MINITASK_BROKER_URL.

Each task records ``start:<tag>`` in ``slots:log``, waits until ``slots:go`` exists
(a minute at most), and records ``end:<tag>``: the test decides when a slot frees,
with no timing of its own.
"""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask

app = Minitask("slots", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")),
               max_deliveries=int(os.environ.get("TEST_MAX_DELIVERIES", "5")))


def _held(tag: str) -> str:
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.rpush("slots:log", f"start:{tag}")
        deadline = time.monotonic() + 60.0
        while not client.exists("slots:go") and time.monotonic() < deadline:
            time.sleep(0.02)
        client.rpush("slots:log", f"end:{tag}")
    finally:
        client.close()
    return tag


@app.task(max_running=1)
def limited(tag: str) -> str:
    return _held(tag)


@app.task(group_by="account", group_max_running=1)
def grouped(account: str, tag: str) -> str:
    return _held(tag)


@app.task(rate_limit="6/m")
def paced(tag: str) -> str:
    return _held(tag)


@app.task(group_by="account", group_rate_limit="6/m")
def rated(account: str, tag: str) -> str:
    return _held(tag)
