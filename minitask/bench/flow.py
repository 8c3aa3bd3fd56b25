"""``minitask bench``'s flow control rows: a queue whose tasks have limits
configured but never reached drains as fast as one without (target: within 10 %),
and what the fetch script costs Redis per fetch, without limits and with limits not
reached, and per task it parks over its limit.

Runs under a throwaway app name of its own (its worker process loads
``-A minitask.bench.flow:app``) and deletes its keys when done.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

import redis

from ..app import Minitask
from ..broker.keys import queue_keys
from ..errors import BrokerError
from ..printable import own_logger
from .capacity import Capacity, Tally
from .report import median
from .scratch import BENCH, purge
from .workers import Workers

logger = own_logger(__name__)

APP_ENV = "MINITASK_BENCH_FLOW_APP"
TASKS = 5000
FETCHES = 1000
#: Runs of each cost, the kinds taking turns; the best of each is shown (on a shared
#: machine other load only ever slows a run down).
ROUNDS = 5
#: Rounds of the drains: each drains both queues, one after the other (which goes
#: first alternates), and the median of the rounds' ratios is compared. Two drains
#: of the same queue vary by 10-20 % here (thread switches, other load), so the
#: best of each kind compares two lucky runs; a round's two drains share the same
#: moment, and the median of nine is robust to a few disturbed ones.
DRAIN_ROUNDS = 9

#: The app the bench's worker process loads.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-flow"))


@app.task
def free(index: int) -> None:
    """A no-op without limits."""


@app.task(rate_limit="1000000/s", max_running=100000)
def capped(index: int) -> None:
    """The same no-op, with limits configured that the bench never reaches."""


@app.task(rate_limit="1/h")
def held(index: int) -> None:
    """The same no-op, over its limit after one start: its fetches park it."""


class FlowBench:
    """Owns one worker process (``--pool thread -c 4``) and the bench's keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app_name = f"{BENCH}-flow-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.app = Minitask(self.app_name, broker=url)
        self.free = self.app.task(name=free.name)(free.func)
        self.capped = self.app.task(name=capped.name, rate_limit="1000000/s",
                                    max_running=100000)(capped.func)
        self.held = self.app.task(name=held.name, rate_limit="1/h")(held.func)
        self.workers = Workers("minitask.bench.flow", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the flow bench's worker")

    def start_worker(self) -> None:
        self.workers.start("--pool", "thread", "-c", "4")
        self.workers.wait_registered(self.client, 1)  # and in its blocking wait

    def close(self) -> None:
        self.workers.stop()
        purge(self.client, self.app_name)
        self.app.close()
        self.client.close()

    def drain(self, task: Any, tally: Tally) -> float:
        """Seconds from sending TASKS no-ops to the queue holding none of them; their
        CPU is added to ``tally``."""
        messages = queue_keys(self.app_name, "default").messages
        with tally.window(self.client, [p.pid for p in self.workers.processes], TASKS):
            start = time.perf_counter()
            task.delay_many([(index,) for index in range(TASKS)])
            deadline = time.monotonic() + 120
            while self.client.hlen(messages):
                if time.monotonic() > deadline:
                    raise BrokerError("the flow bench's worker did not drain the queue")
                time.sleep(0.002)
            end = time.perf_counter()
        return end - start

    def fetch_cost(self, task: Any) -> float:
        """Redis microseconds per fetch script call, from INFO commandstats (no worker
        runs meanwhile, so every EVALSHA counted is one of these fetches)."""
        task.delay_many([(index,) for index in range(FETCHES)])
        queues = self.app.broker.queues
        before = _evalsha(self.client)
        now_ms = int(time.time() * 1000)
        for _ in range(FETCHES):
            queues.fetch("default", now_ms=now_ms, lease_ms=600_000, count=1,
                         max_deliveries=5)
        calls, usec = (after - first for after, first in zip(_evalsha(self.client), before))
        return usec / max(1, calls)

    def park_cost(self) -> float:
        """Redis microseconds per task a fetch parks (``held`` is over its limit after
        one start): a fetch parks a batch, so this is per task, not per call."""
        self.held.delay_many([(index,) for index in range(FETCHES)])
        queues = self.app.broker.queues
        before = _evalsha(self.client)
        now_ms = int(time.time() * 1000)
        for _ in range(FETCHES):
            result = queues.fetch("default", now_ms=now_ms, lease_ms=600_000, count=1,
                                  max_deliveries=5)
            if result.next_event_ms != now_ms:
                break  # nothing left to park: the fetch read the next event
        _, usec = (after - first for after, first in zip(_evalsha(self.client), before))
        return usec / FETCHES


def _evalsha(client: "redis.Redis") -> Tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def measure_flow(url: str, drain_rounds: int = DRAIN_ROUNDS,
                 capacity: Optional[Capacity] = None) -> List[Dict[str, Any]]:
    """The flow control rows, as ``bench.Row`` keyword arguments (fewer ``drain_rounds``:
    a quicker, rougher drain row, for a test that checks the rows run); the CPU per
    task of both drains goes to ``capacity`` when given."""
    bench = FlowBench(url)
    try:
        plain_costs, limited_costs, parking_costs = [], [], []
        for _ in range(ROUNDS):  # taking turns; the best of each (see ROUNDS)
            plain_costs.append(bench.fetch_cost(bench.free))
            limited_costs.append(bench.fetch_cost(bench.capped))
            parking_costs.append(bench.park_cost())
        plain_cost, limited_cost = min(plain_costs), min(limited_costs)
        parking_cost = min(parking_costs)
        bench.close()
        bench = FlowBench(url)
        bench.start_worker()
        logger.info("flow control: %d tasks with limits not reached, and without", TASKS)
        plain, limited = [], []
        free_cpu, capped_cpu = Tally(), Tally()
        for round_number in range(drain_rounds):
            if round_number % 2:
                limited.append(bench.drain(bench.capped, capped_cpu))
                plain.append(bench.drain(bench.free, free_cpu))
            else:
                plain.append(bench.drain(bench.free, free_cpu))
                limited.append(bench.drain(bench.capped, capped_cpu))
    finally:
        bench.close()
    if capacity is not None:
        how = (f"delay_many() then a drain by one worker (--pool thread -c 4), "
               f"{drain_rounds} x {TASKS:,} no-ops")
        capacity.add("flow control (rate_limit + max_running), thread pool -c 4",
                     capped_cpu.redis_us, capped_cpu.worker_us,
                     f"limits configured, never reached; {how}")
        capacity.add("the same without limits, thread pool -c 4", free_cpu.redis_us,
                     free_cpu.worker_us, how)
    ratios = sorted(slow / fast for slow, fast in zip(limited, plain))
    ratio = median(ratios)
    return [
        {"metric": f"drain of {TASKS:,} with limits not reached vs none", "value": ratio * 100,
         "unit": "%", "target": "<= 110 %", "met": ratio <= 1.10,
         "detail": f"median of {drain_rounds} rounds (each drains both; rounds "
                   f"{ratios[0] * 100:.0f}-{ratios[-1] * 100:.0f} %); rate_limit and "
                   f"max_running configured: median {TASKS / median(limited):,.0f} tasks/s, "
                   f"none: {TASKS / median(plain):,.0f} tasks/s (one worker, 4 threads)"},
        {"metric": "Redis time per fetch of a limited task", "value": limited_cost,
         "unit": "us", "target": "-", "met": None,
         "detail": f"a fetch of a task without limits: {plain_cost:.1f} us (INFO "
                   f"commandstats, best of {ROUNDS} runs of {FETCHES:,} fetches each)"},
        {"metric": "Redis time per task a fetch parks over its limit",
         "value": parking_cost, "unit": "us", "target": "-", "met": None,
         "detail": f"rate_limit='1/h' reached: fetches park the tasks in batches and hand "
                   f"out none (best of {ROUNDS} runs of {FETCHES:,} tasks each)"},
    ]
