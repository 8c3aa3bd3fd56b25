"""``minitask bench``'s producer rows: ``delay()`` beside a bare redis-py ``LPUSH`` of
the same number of bytes, and ``app.batch()`` beside ``delay_many()`` and ``delay()``.

Both sides of each row run in alternating blocks, so that both see the same load
on a shared machine; the median over the rounds is the figure, the spread is
reported beside it. Redis's CPU per call is read from ``INFO cpu`` before and
after each block (what an operator reads). No worker runs: the rows measure the
producer and Redis, and the bench deletes its keys when done.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import redis

from ..app import Minitask
from .capacity import redis_cpu_seconds
from .report import median
from .scratch import LPUSH, purge

#: Rounds per row, at least: each a block of either side, in turn.
ROUNDS = 9
#: Calls per block of the delay() row.
DELAY_BLOCK = 500
#: Calls per batch (and per delay_many()) in the batch row, and batches per block.
BATCH_CALLS = 100
BATCHES = 20


def measure_producer(url: str, app_name: str, tasks: int,
                     progress: Callable[[str], None]) -> List[Dict[str, Any]]:
    """The producer rows, as keyword arguments of the bench's Row."""
    producer = Minitask(app_name, broker=url)

    @producer.task(name="bench.noop", ignore_result=True)
    def noop(index: int) -> None:
        """Never run: only sent."""

    client = redis.Redis.from_url(url)
    try:
        return [_delay_row(client, producer, noop, tasks, progress),
                _batch_row(client, producer, noop, progress)]
    finally:
        producer.close()
        purge(client, app_name, LPUSH)
        client.close()


def _timed(client: redis.Redis, calls: int, run: Callable[[], None]) -> Tuple[float, float]:
    """(calls/s, Redis CPU us per call) of ``run``, which makes ``calls`` calls."""
    cpu = redis_cpu_seconds(client)
    start = time.perf_counter()
    run()
    spent = time.perf_counter() - start
    return calls / spent, (redis_cpu_seconds(client) - cpu) / calls * 1e6


def _delay_row(client: redis.Redis, producer: Minitask, noop: Any, tasks: int,
               progress: Callable[[str], None]) -> Dict[str, Any]:
    # short rounds, many of them: the load of a shared machine changes within a second
    per_block, rounds = DELAY_BLOCK, max(ROUNDS, tasks // DELAY_BLOCK // 2)
    progress(f"delay() beside a bare LPUSH of the same size: {rounds} rounds of "
             f"{per_block:,} each")
    handle = noop.delay(0)  # connects, registers the queue
    size = len(producer.broker.queues.message_body("default", handle.id) or b"")
    body = b"x" * size

    def bare() -> None:
        for _ in range(per_block):
            client.lpush(LPUSH, body)

    def sent() -> None:
        for index in range(per_block):
            noop.delay(index)

    rates: List[float] = []
    ratios: List[float] = []
    cpu: List[Tuple[float, float]] = []
    for round_ in range(rounds):
        if round_ % 2:  # each side goes first in every other round
            theirs, ours = _timed(client, per_block, bare), _timed(client, per_block, sent)
        else:
            ours, theirs = _timed(client, per_block, sent), _timed(client, per_block, bare)
        client.delete(LPUSH)
        rates.append(ours[0])
        ratios.append(ours[0] / theirs[0])
        cpu.append((ours[1], theirs[1]))
    ratio = median(ratios)
    ours_us, theirs_us = median([c[0] for c in cpu]), median([c[1] for c in cpu])
    cpu_ratio = median([c[0] / c[1] for c in cpu])
    return {"metric": "delay() beside a bare LPUSH loop", "value": median(rates),
            "unit": "tasks/s", "target": ">= 0.9 x LPUSH of the same size, Redis CPU per "
                                         "call <= 1.1 x", "met": ratio >= 0.9 and cpu_ratio <= 1.1,
            "detail": f"{ratio:.2f} x LPUSH ({size} bytes; rounds {min(ratios):.2f}-"
                      f"{max(ratios):.2f} x); Redis CPU per call {ours_us:.1f} us against "
                      f"{theirs_us:.1f} us ({cpu_ratio:.2f} x); medians of {rounds} rounds"}


@contextlib.contextmanager
def _writes(producer: Minitask) -> Iterator[List[int]]:
    """Count the writes (each one round trip) on this thread's own connection."""
    connection = producer.broker.transport.connections.own()
    counted = [0]
    send = connection.send_packed_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return send(*args, **kwargs)

    connection.send_packed_command = counting
    try:
        yield counted
    finally:
        del connection.send_packed_command


def _batch_row(client: redis.Redis, producer: Minitask, noop: Any,
               progress: Callable[[str], None]) -> Dict[str, Any]:
    progress(f"app.batch() of {BATCH_CALLS} calls beside delay_many() and delay(): "
             f"{ROUNDS} rounds of {BATCHES} each")
    calls = BATCH_CALLS * BATCHES

    def batched() -> None:
        for _ in range(BATCHES):
            with producer.batch():
                for index in range(BATCH_CALLS):
                    noop.delay(index)

    def many() -> None:
        for _ in range(BATCHES):
            noop.delay_many([(index,) for index in range(BATCH_CALLS)])

    def single() -> None:
        for index in range(calls):
            noop.delay(index)

    batched()  # the scripts loaded
    many()
    with _writes(producer) as batch_writes:
        with producer.batch():
            for index in range(BATCH_CALLS):
                noop.delay(index)
    with _writes(producer) as many_writes:
        noop.delay_many([(index,) for index in range(BATCH_CALLS)])
    rates: List[float] = []
    cpu: List[Tuple[float, float, float]] = []
    for round_ in range(ROUNDS):
        order = [batched, many, single] if round_ % 2 else [single, many, batched]
        found = {run: _timed(client, calls, run) for run in order}
        rates.append(found[batched][0])
        cpu.append((found[batched][1], found[many][1], found[single][1]))
    batch_us, many_us, single_us = (median([c[i] for c in cpu]) for i in range(3))
    ratio = median([c[0] / c[2] for c in cpu])
    return {"metric": f"app.batch() of {BATCH_CALLS} delay() calls", "value": median(rates),
            "unit": "tasks/s", "target": "round trips <= delay_many()'s, Redis CPU per "
                                         "message <= delay()'s",
            "met": batch_writes[0] <= many_writes[0] and ratio <= 1.0,
            "detail": f"{batch_writes[0]} round trip(s), delay_many() {many_writes[0]}; Redis "
                      f"CPU per message {batch_us:.1f} us, delay_many() {many_us:.1f} us, "
                      f"delay() {single_us:.1f} us ({ratio:.2f} x); medians of {ROUNDS} rounds"}
