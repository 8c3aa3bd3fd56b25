"""``minitask bench``'s producer rows: ``delay()`` beside a bare redis-py ``LPUSH`` of
the same number of bytes, and 20 mixed calls in one ``app.batch()`` block beside
the round trip each call would pay on its own.

Both sides of each row run in alternating blocks, so that both see the same load
on a shared machine; the spread over the blocks is reported beside the figure.
No worker runs: the rows measure the producer and Redis, and the bench deletes
its keys when done.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List

import redis

from ..app import Minitask
from .report import median
from .scratch import LPUSH, purge

#: Alternating blocks per row.
BLOCKS = 10
#: Calls per batch block.
BATCH_CALLS = 20


def measure_producer(url: str, app_name: str, tasks: int,
                     progress: Callable[[str], None]) -> List[Dict[str, Any]]:
    """The producer rows, as keyword arguments of the bench's Row."""
    producer = Minitask(app_name, broker=url)

    @producer.task(name="bench.noop", ignore_result=True)
    def noop(index: int) -> None:
        """Never run: only sent."""

    @producer.task(name="bench.mail", ignore_result=True, queue="bench-other")
    def mail(index: int) -> None:
        """Never run: only sent, to a second queue."""

    client = redis.Redis.from_url(url)
    try:
        return [_delay_row(client, producer, noop, tasks, progress),
                _batch_row(client, producer, noop, mail, progress)]
    finally:
        producer.close()
        purge(client, app_name, LPUSH)
        client.close()


def _delay_row(client: redis.Redis, producer: Minitask, noop: Any, tasks: int,
               progress: Callable[[str], None]) -> Dict[str, Any]:
    per_block = max(100, tasks // BLOCKS)
    progress(f"delay() beside a bare LPUSH of the same size: {BLOCKS} x {per_block:,} each")
    handle = noop.delay(0)  # connects, loads the script, registers the queue
    size = len(producer.broker.queues.message_body("default", handle.id) or b"")
    body = b"x" * size
    ratios: List[float] = []
    spent = baseline = 0.0
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for _ in range(per_block):
            client.lpush(LPUSH, body)
        middle = time.perf_counter()
        for index in range(per_block):
            noop.delay(index)
        end = time.perf_counter()
        client.delete(LPUSH)
        spent += end - middle
        baseline += middle - start
        ratios.append((middle - start) / (end - middle))
    rate, bare = per_block * BLOCKS / spent, per_block * BLOCKS / baseline
    return {"metric": "delay() beside a bare LPUSH loop", "value": rate, "unit": "tasks/s",
            "target": ">= 0.95 x LPUSH of the same size", "met": rate >= 0.95 * bare,
            "detail": f"{rate / bare:.2f} x LPUSH ({bare:,.0f}/s, {size} bytes); blocks "
                      f"{min(ratios):.2f}-{max(ratios):.2f} x, median {median(ratios):.2f}"}


def _batch_row(client: redis.Redis, producer: Minitask, noop: Any, mail: Any,
               progress: Callable[[str], None]) -> Dict[str, Any]:
    rounds = 20 * BLOCKS
    progress(f"app.batch(): {BATCH_CALLS} mixed calls per block, {rounds} blocks, beside "
             f"a bare SET round trip and the same calls one at a time")
    mail.delay(0)  # the second queue is registered before the clock runs

    def calls() -> None:
        for index in range(BATCH_CALLS // 4):
            noop.delay(index)
            mail.delay(index)
            noop.apply_in(3600, index)
            noop.apply_async((index,), priority=9)

    batch_ms: List[float] = []
    single_ms: List[float] = []
    trip_ms: List[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        client.set(LPUSH, b"x")
        middle = time.perf_counter()
        with producer.batch():
            calls()
        end = time.perf_counter()
        calls()
        single_ms.append((time.perf_counter() - end) * 1000.0)
        trip_ms.append((middle - start) * 1000.0)
        batch_ms.append((end - middle) * 1000.0)
    batch, trip = median(batch_ms), median(trip_ms)
    return {"metric": f"app.batch() of {BATCH_CALLS} mixed calls", "value": batch, "unit": "ms",
            "target": "< 2 round trips", "met": batch < 2 * trip,
            "detail": f"{batch / trip:.2f} round trips (a bare SET: median {trip:.3f} ms); "
                      f"the same calls one at a time {median(single_ms):.2f} ms; medians "
                      f"of {rounds}"}
