"""Async tasks for a stop during an overrun's hold (review29e F1): ``stubborn``
(tests.apps.overrun's) takes the cancel of its time limit and goes on (its slot is
held), ``mark`` says in the Redis list ``runs`` each time it starts, then runs for a
while. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import asyncio
import os

import redis

from minitask import Minitask
from tests.apps import overrun

app = Minitask("overrun_follow", visibility_timeout=3.0)  # a heartbeat a second

#: tests.apps.overrun's ``stubborn``, with its limits
stubborn = app.task(name="stubborn", timeout=0.5, retries=0)(overrun.stubborn.func)


@app.task(name="mark", retries=0)
async def mark(seconds: float) -> int:
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        client.rpush("runs", str(os.getpid()))
    finally:
        client.close()
    await asyncio.sleep(seconds)
    return os.getpid()
