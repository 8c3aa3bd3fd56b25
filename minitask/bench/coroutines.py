"""The asyncio rows of ``minitask bench``: ``adelay()`` one at a time against a bare
``redis.asyncio`` SET loop, and the asyncio pool draining 10 ms sleeping tasks.

Its own module (and app, for the worker processes it starts) so that the
blocking bench does not import asyncio machinery it does not measure.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import Callable, List, Tuple

import redis

from ..app import Minitask
from ..broker.keys import queue_keys
from .scratch import BASELINE, BENCH, purge
from .workers import Workers

#: The environment variable naming the bench's app (as the blocking bench's).
APP_ENV = "MINITASK_BENCH_APP"

app = Minitask(os.environ.get(APP_ENV, BENCH))

#: One row: metric, value, unit, target, met (None: no target), detail.
Measured = Tuple[str, float, str, str, "bool | None", str]


@app.task(ignore_result=True)
async def nap10ms(index: int) -> None:
    await asyncio.sleep(0.01)


def measure(url: str, app_name: str, tasks: int,
            progress: Callable[[str], None]) -> List[Measured]:
    """Every asyncio row, against the Redis at ``url``, under the app ``app_name``."""
    rows = [_adelay(url, app_name, min(tasks, 20_000), progress)]
    for concurrency in (100, 1000):
        rows.append(_drain(url, app_name, max(tasks, 2 * concurrency), concurrency, progress))
    return rows


def _producer(url: str, app_name: str) -> Minitask:
    producer = Minitask(app_name, broker=url)
    producer.task(name=nap10ms.name, ignore_result=True)(nap10ms.func)
    return producer


def _adelay(url: str, app_name: str, n: int, progress: Callable[[str], None]) -> Measured:
    progress(f"adelay(): {n:,} calls one at a time, beside a redis.asyncio SET loop")
    producer = _producer(url, app_name)
    task = producer.tasks[nap10ms.name]

    async def both() -> Tuple[float, float]:
        client = producer.async_broker().client
        spent = baseline = 0.0
        for _ in range(10):  # alternating blocks: both see the same load on the machine
            start = time.perf_counter()
            for index in range(n // 10):
                await client.set(BASELINE, index)
            middle = time.perf_counter()
            for index in range(n // 10):
                await task.adelay(index)
            spent += time.perf_counter() - middle
            baseline += middle - start
        await producer.aclose()
        return spent, baseline

    spent, baseline = asyncio.run(both())
    producer.close()
    client = redis.Redis.from_url(url)
    purge(client, app_name)
    client.close()
    rate, single = n // 10 * 10 / spent, n // 10 * 10 / baseline
    return ("adelay() one call at a time", rate, "tasks/s", ">= 0.6 x redis.asyncio SET loop",
            rate >= 0.6 * single, f"{rate / single:.2f} x the SET loop ({single:,.0f}/s)")


def _drain(url: str, app_name: str, n: int, concurrency: int,
           progress: Callable[[str], None]) -> Measured:
    progress(f"drain: {n:,} tasks sleeping 10 ms, --pool asyncio -c {concurrency}")
    producer = _producer(url, app_name)
    for start in range(0, n, 1000):
        producer.tasks[nap10ms.name].delay_many([(i,) for i in range(start, min(n, start + 1000))])
    client = redis.Redis.from_url(url)
    messages = queue_keys(app_name, "default").messages
    workers = Workers("minitask.bench.coroutines", app_env=APP_ENV, app_name=app_name, url=url,
                      label="the asyncio bench's worker")
    started = time.perf_counter()
    workers.start("--pool", "asyncio", "-c", str(concurrency))
    try:
        deadline = time.monotonic() + 300
        while client.hlen(messages) and time.monotonic() < deadline:
            time.sleep(0.005)
        elapsed = time.perf_counter() - started  # worker start-up included
    finally:
        workers.stop(grace=60.0)
        producer.close()
        purge(client, app_name)
        client.close()
    return (f"asyncio pool drain, 10 ms sleeps, -c {concurrency}", n / elapsed, "tasks/s",
            "", None, f"{n:,} tasks in {elapsed:.2f} s, worker start-up included")
