"""An app for the tests of a fetch refused part way by an ACL changed while a worker runs
(issue 29): each task counts its runs with INCR in ``runs:<key>`` (never HINCRBY, the
command the test takes away), ``grouped`` by tenant (a fair queue). The broker comes
from MINITASK_BROKER_URL; TEST_VISIBILITY sets visibility_timeout."""
from __future__ import annotations

import os

import redis

from minitask import Minitask

app = Minitask("aclfetch", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


def _count(key: str) -> str:
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.incr(f"runs:{key}")
    finally:
        client.close()
    return key


@app.task(name="counted")
def counted(key: str) -> str:
    """Count this run (runs:<key>) and return ``key``."""
    return _count(key)


@app.task(name="grouped", group_by="tenant")
def grouped(tenant: str, key: str) -> str:
    """Count this run (runs:<key>) and return ``key``: a task of ``tenant``'s group."""
    return _count(key)
