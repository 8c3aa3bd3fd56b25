"""An app for the tests of planted solo-group claims (flow:groups_solo) naming real
tasks: ``job`` records its start; ``gated`` records its start and then waits (a
minute at most) for the key ``claims:open``, so that a test holds it leased. Both
are grouped by tenant in the queue ``default``; the broker comes from
MINITASK_BROKER_URL. Starts go to ``claims:starts`` as ``<tenant>:<n>``.
"""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask

app = Minitask("claims")

_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


@app.task(group_by="tenant")
def job(tenant: str, n: int) -> None:
    """Record its start in ``claims:starts``."""
    _client().rpush("claims:starts", f"{tenant}:{n}")


@app.task(group_by="tenant")
def gated(tenant: str, n: int) -> None:
    """Record its start, then wait until ``claims:open`` exists (60 s at most)."""
    client = _client()
    client.rpush("claims:starts", f"{tenant}:{n}")
    deadline = time.monotonic() + 60
    while not client.exists("claims:open") and time.monotonic() < deadline:
        time.sleep(0.02)
