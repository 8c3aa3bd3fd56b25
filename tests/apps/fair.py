"""An app for fair-queue tests (guide/fair-queues); the broker comes from
MINITASK_BROKER_URL.

Each task records its start (and, for ``ordered``, its end) in Redis lists under
``fair:``, pushed from the task itself, so tests read the order in which tasks
really started and ended: on the broker, or on TEST_MARKS_URL when set (a plain
server beside a cluster broker).
"""
from __future__ import annotations

import os
import time

import redis

from minitask import Minitask, current_task

app = Minitask("fair", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))

_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        # a plain server for the records when the broker is a cluster (tests/scale)
        url = os.environ.get("TEST_MARKS_URL") or os.environ["MINITASK_BROKER_URL"]
        _clients[pid] = redis.Redis.from_url(url)
    return _clients[pid]


@app.task(group_by="tenant")
def tenant_job(tenant: str, n: int) -> None:
    """Record its start in ``fair:starts`` as ``<tenant>:<n>``."""
    _client().rpush("fair:starts", f"{tenant}:{n}")


@app.task(group_by="group", group_max_running=1, retries=3, retry_backoff=0.05,
          retry_backoff_max=0.1)
def ordered(group: str, n: int) -> None:
    """Record ``start`` and ``end`` in ``fair:log:<group>``; fail the first attempt of
    the tasks named in ``fair:fail``; hang the first attempt of the one named in
    ``fair:hang`` (its worker is killed: the next delivery runs on)."""
    context = current_task()
    assert context is not None
    client = _client()
    name = f"{group}:{n}"
    pid = os.getpid()
    client.rpush(f"fair:log:{group}", f"start:{n}:{context.attempt}:-:{pid}")
    time.sleep(0.002)
    if context.delivery == 1 and client.get("fair:hang") == name.encode():
        client.set("fair:hung", os.getpid())
        time.sleep(120)
    if context.attempt == 1 and client.sismember("fair:fail", name):
        client.rpush(f"fair:log:{group}", f"end:{n}:{context.attempt}:failed:{pid}")
        raise RuntimeError(f"{name} fails its first attempt")
    client.rpush(f"fair:log:{group}", f"end:{n}:{context.attempt}:ok:{pid}")


@app.task(group_by="tenant", ignore_result=True)
def grouped_noop(tenant: str, n: int) -> None:
    """Nothing, grouped by ``tenant``: tools/fair_drain.py's grouped drains."""


@app.task(ignore_result=True)
def plain_noop(tenant: str, n: int) -> None:
    """Nothing, ungrouped: tools/fair_drain.py's baseline drain."""
