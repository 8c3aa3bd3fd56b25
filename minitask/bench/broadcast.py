"""``minitask bench``'s fan-out rows: broadcast calls to a group of 10 subscribers.

Ten worker processes (``--pool thread -c 1``, each its own ``--name``) load
``-A minitask.bench.broadcast:app`` under a throwaway app name; the rows are
the calls per second delivered to all ten, and the pickup latency of a call
sent to the idle group (send to start, per subscriber). Its keys are deleted
when done.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

import redis

from ..app import Minitask
from ..printable import own_logger
from .capacity import Capacity, Tally
from .scratch import BENCH, purge
from .workers import Workers

logger = own_logger(__name__)

APP_ENV = "MINITASK_BENCH_BROADCAST_APP"
QUEUE = "fanout"
SUBSCRIBERS = 10
CALLS = 1000
SAMPLES = 50

#: The app the bench's worker processes load.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-broadcast"))


@app.task(broadcast=True, queue=QUEUE, ignore_result=True)
def nothing(index: int) -> None:
    """A no-op broadcast call."""


@app.task(broadcast=True, queue=QUEUE)
def arrived(sent_at: float) -> float:
    """Seconds from ``sent_at`` (the producer's clock) to the start of this run."""
    return time.time() - sent_at


def _percentile(values: List[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class FanoutBench:
    """Owns the subscribers' worker processes and the bench's keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app_name = f"{BENCH}-broadcast-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.app = Minitask(self.app_name, broker=url)
        for task in app.tasks.values():
            self.app.task(name=task.name, broadcast=True, queue=QUEUE,
                          ignore_result=task.options.ignore_result)(task.func)
        self.workers = Workers("minitask.bench.broadcast", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the fan-out bench's workers")

    def task(self, function: Any) -> Any:
        return self.app.tasks[function.name]

    def start(self) -> None:
        for index in range(SUBSCRIBERS):
            self.workers.start("--pool", "thread", "-c", "1", "-Q", QUEUE, "--name", f"s{index}")
        # every subscriber known, then in its blocking wait
        self.workers.wait_for(lambda: len(self.app.subscribers(QUEUE)) >= SUBSCRIBERS,
                              timeout=60, settle=0.5)

    def close(self) -> None:
        self.workers.stop()
        purge(self.client, self.app_name)
        self.app.close()
        self.client.close()

    def throughput(self, tally: Tally) -> float:
        """Calls per second, from sending ``CALLS`` at once until all ten ran them all;
        their CPU per call and subscriber is added to ``tally``."""
        with tally.window(self.client, [p.pid for p in self.workers.processes],
                          (CALLS + 1) * SUBSCRIBERS):
            start = time.perf_counter()
            self.task(nothing).delay_many([(index,) for index in range(CALLS)])
            # each subscriber runs its calls in send order: the last one done means all done
            self.task(arrived).delay(0.0).join(timeout=300)
            end = time.perf_counter()
        return (CALLS + 1) / (end - start)

    def pickups(self) -> Dict[str, List[float]]:
        """Per sample, ms from delay() to the start of the run on each subscriber."""
        first: List[float] = []
        every: List[float] = []
        for _ in range(SAMPLES):
            outcomes = self.task(arrived).delay(time.time()).join(timeout=60)
            delays = [value * 1000.0 for value in outcomes.values()]
            first.append(min(delays))
            every.extend(delays)
            time.sleep(0.02)  # the group is idle again before the next one
        return {"first": first, "every": every}


def measure_fanout(url: str, capacity: Optional[Capacity] = None) -> List[Dict[str, Any]]:
    """The fan-out rows, as ``bench.Row`` keyword arguments; a call's CPU per subscriber
    goes to ``capacity`` when given."""
    bench = FanoutBench(url)
    tally = Tally()
    try:
        bench.start()
        logger.info("fan-out: %d subscribers, %d calls at once, %d pickups", SUBSCRIBERS, CALLS,
                    SAMPLES)
        rate = bench.throughput(tally)
        found = bench.pickups()
    finally:
        bench.close()
    if capacity is not None:
        capacity.add("a broadcast call, per subscriber", tally.redis_us, tally.worker_us,
                     f"delay_many() of {CALLS:,} no-op calls to {SUBSCRIBERS} subscribers "
                     f"(thread pool -c 1 each), per call and subscriber")
    first_p50 = _percentile(found["first"], 0.5)
    every_p50 = _percentile(found["every"], 0.5)
    every_p99 = _percentile(found["every"], 0.99)
    cpus = os.cpu_count() or 1
    return [
        {"metric": f"fan-out to {SUBSCRIBERS} subscribers: calls/s delivered to all",
         "value": rate, "unit": "calls/s", "target": "-", "met": None,
         "detail": f"{rate * SUBSCRIBERS:,.0f} runs/s in all; {SUBSCRIBERS} worker processes "
                   f"(thread pool, 1 each) on {cpus} CPU(s)"},
        {"metric": f"broadcast pickup, idle group of {SUBSCRIBERS}: first subscriber p50",
         "value": first_p50, "unit": "ms", "target": "<= 1 ms", "met": first_p50 <= 1.0,
         "detail": "delay() to the start of the earliest of the ten runs"},
        {"metric": f"broadcast pickup, idle group of {SUBSCRIBERS}: every subscriber p50",
         "value": every_p50, "unit": "ms", "target": "-", "met": None,
         "detail": f"p99 {every_p99:.2f} ms; {SUBSCRIBERS} processes woken at once share "
                   f"{cpus} CPU(s)"},
    ]
