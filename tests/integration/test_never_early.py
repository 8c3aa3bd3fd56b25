"""Never early: a delayed task starts at or after the instant its producer asked for.

Due times are whole ms; the producer rounds the instant up to the next one,
and the worker promotes a task only once its own (rounded down) clock reads
that ms. 1,000 tasks at sub-millisecond offsets, on a real redis-server and a
real worker in this process, so that start and request are read on one clock.
Before the producer rounded up (it added the delay to a rounded-down ms
reading), 22 of these 1,000 started up to 0.3 ms early.
"""
from __future__ import annotations

import threading
import time
from fractions import Fraction
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from minitask import Minitask
from minitask.wire.message import SystemClock, due_after_ms
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TASKS = 1000


class RecordingClock(SystemClock):
    """The system clock, remembering in ns every reading a producer took (in ms or ns)."""

    def __init__(self) -> None:
        self.readings: List[int] = []

    def now_ns(self) -> int:
        self.readings.append(time.time_ns())
        return self.readings[-1]

    def now_ms(self) -> int:
        return self.now_ns() // 1_000_000


@pytest.fixture
def apps(redis_server: RedisServer,
         admin: Any) -> Iterator[Tuple[Minitask, Minitask, Dict[int, int]]]:
    started: Dict[int, int] = {}
    clock = RecordingClock()
    producer = Minitask("never-early", broker=redis_server.url, clock=clock)
    consumer = Minitask("never-early", broker=redis_server.url)
    for app in (producer, consumer):
        @app.task(name="stamp", ignore_result=True)
        def stamp(index: int) -> None:
            started.setdefault(index, time.time_ns())
    try:
        yield producer, consumer, started
    finally:
        producer.close()
        consumer.close()


def test_due_after_ms_rounds_the_requested_instant_up() -> None:
    class At(SystemClock):
        def now_ns(self) -> int:
            return 1_000_900_000  # 1000.9 ms: its ms reading is 1000
    assert due_after_ms(At(), 0.0005) == 1002  # the instant 1001.4 ms, not 1001
    assert due_after_ms(At(), 0.0001) == 1001  # the instant 1001.0 ms exactly
    assert due_after_ms(At(), 0.001) == 1002


@pytest.mark.timeout(600)  # 1,000 tasks one after another: generous on a loaded machine
def test_a_thousand_tasks_at_sub_ms_offsets_never_start_early(
        apps: Tuple[Minitask, Minitask, Dict[int, int]]) -> None:
    producer, consumer, started = apps
    clock = producer.clock
    assert isinstance(clock, RecordingClock)
    task = producer.tasks["stamp"]
    worker = consumer.worker(concurrency=2)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    requested: List[Fraction] = []  # ns
    try:
        for index in range(TASKS):
            # 2 to 4 ms ahead, each with its own fraction of a ms; sent one after the
            # other's start, so that the worker is idle, its timer set, when each is due
            offset = 0.002 + (index % 53) * 0.0000377 + (index % 7) * 0.000131
            if index % 2:
                clock.readings.clear()
                task.apply_in(offset, index)
                # "now" is the first reading apply_in takes
                requested.append(Fraction(clock.readings[0]) + Fraction(offset) * 10**9)
            else:
                when = time.time() + offset
                task.apply_at(when, index)
                requested.append(Fraction(when) * 10**9)
            # polled every 5 ms: at 0.5 ms this thread's polls slowed the worker's, in
            # this process, to a third of a second a task (358 s for the 1,000)
            wait_until(lambda: index in started, timeout=60.0, interval=0.005)
    finally:
        worker.stop()
        runner.join(timeout=60)
    early = [(index, float(requested[index] - started[index]) / 1e6)
             for index in range(TASKS) if started[index] < requested[index]]
    assert early == [], f"{len(early)} task(s) started early (index, ms early): {early[:10]}"
