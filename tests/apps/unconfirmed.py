"""An app whose writes replicas must confirm (durability="replicated", a short
timeout), for worker processes whose replica is stopped; the broker comes from
MINITASK_BROKER_URL. A chord's members and body, a schedule firing every second on
queue "ticking", and a plain task on queue "plain"."""
from __future__ import annotations

import time
from typing import List

from minitask import Minitask

app = Minitask("unconfirmed", durability="replicated", min_replicas=1,
               durability_timeout=0.3, result_ttl=600)


@app.task(name="member", retries=0)
def member(n: int, fail: bool = False) -> int:
    time.sleep(1.0)  # ends while the test holds the replica stopped
    if fail:
        raise ValueError(f"member {n} fails")
    return n


@app.task(name="total")
def total(values: List[int]) -> int:
    return sum(values)


@app.periodic(every=1.0, queue="ticking", name="tick")
def tick() -> int:
    return 1


@app.task(name="plain", queue="plain")
def plain(n: int) -> int:
    return n
