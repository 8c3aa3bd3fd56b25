"""An app whose writes replicas must confirm (durability="replicated", a short
timeout), with a broadcast queue "tidings" and no schedule, for a worker started
while its replica is stopped; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("unconfirmed_bc", durability="replicated", min_replicas=1,
               durability_timeout=0.3, result_ttl=600)


@app.task(name="tidings", queue="tidings", broadcast=True)
def tidings(n: int) -> int:
    return n


@app.task(name="plain", queue="plain")
def plain(n: int) -> int:
    return n
