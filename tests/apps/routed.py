"""An app with routes, for sends by name from programs that import none of it; the
broker comes from MINITASK_BROKER_URL.

Its tasks retry any error twice, so that a test can tell a call dead-lettered at
once from one that failed its attempts.
"""
from __future__ import annotations

import asyncio
from typing import List

from minitask import Minitask

#: The routes a producer needs to know too (it copies them; it imports nothing here).
ROUTES = {"routed.billing.*": {"queue": "billing", "priority": 7},
          "routed.remote.*": {"queue": "remote"}}

app = Minitask("routed", routes=ROUTES)


@app.task(name="routed.add", retries=2, retry_backoff=0)
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="routed.total", retries=2, retry_backoff=0)
def total(values: List[int]) -> int:
    return sum(values)


@app.task(name="routed.billing.charge", retries=2, retry_backoff=0)
async def charge(cents: int, *, currency: str = "EUR") -> str:
    await asyncio.sleep(0)
    return f"{cents} {currency}"


@app.task(name="routed.plain", retries=2, retry_backoff=0)
def plain() -> str:
    return "plain"
