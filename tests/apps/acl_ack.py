"""An app for the test of an ACL changed while a worker runs (issue 29): its task counts
its runs with INCR (never RPUSH, the command the test takes away), naps, and returns.
The broker comes from MINITASK_BROKER_URL; TEST_VISIBILITY sets visibility_timeout."""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask

app = Minitask("aclack", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


@app.task(name="counted")
def counted(key: str, seconds: float) -> str:
    """Count this run (runs:<key>), sleep ``seconds``, return ``key``."""
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.incr(f"runs:{key}")
    finally:
        client.close()
    time.sleep(seconds)
    return key
