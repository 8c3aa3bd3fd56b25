"""``minitask bench``'s fair-queue rows (guide/fair-queues): how long a small
group's task waits behind a big group's backlog, and what grouping costs a drain.

* Fairness: group A has ``BACKLOG`` tasks ready when group B sends one; fetches of
  one task each (a worker's at prefetch 1) are counted until B's task is leased,
  and timed from B's send. Ungrouped, B's task would wait behind all of A's.
* Cost: ``TASKS`` no-ops drained by one worker process (``--pool process -c 1
  --prefetch 10``), ungrouped, each its own group, and all in one group, taking
  turns; the median of the rounds' rate ratios is shown against the issue's target
  (80 % of the ungrouped rate). ``tools/fair_drain.py`` runs the same drains at
  100,000 tasks (and 100,000 groups), which takes minutes.

Runs under a throwaway app name of its own (its worker process loads
``-A minitask.bench.fair:app``) and deletes its keys when done.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

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

APP_ENV = "MINITASK_BENCH_FAIR_APP"
#: Group A's ready tasks when group B sends its one.
BACKLOG = 5000
#: Tasks of each drain (the bench's; tools/fair_drain.py runs 100,000).
TASKS = 5000
#: Rounds of the drains: each drains the three kinds, the order turning round by
#: round; the median of the rounds' ratios is shown (see bench/flow.py's DRAIN_ROUNDS).
DRAIN_ROUNDS = 5
#: The drains' kinds: (name, the task, how its calls are grouped).
KINDS = ("ungrouped", "groups of one", "one group")
#: The worker's options: tools/fair_drain.py's.
WORKER = ("--pool", "process", "-c", "1", "--prefetch", "10")

#: The app the bench's worker process loads.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-fair"))


@app.task(ignore_result=True)
def plain(tenant: str, index: int) -> None:
    """A no-op, ungrouped."""


@app.task(group_by="tenant", ignore_result=True)
def grouped(tenant: str, index: int) -> None:
    """The same no-op, grouped by ``tenant``."""


class FairBench:
    """Owns one worker process and the bench's keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app_name = f"{BENCH}-fair-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.app = Minitask(self.app_name, broker=url)
        self.plain = self.app.task(name=plain.name, ignore_result=True)(plain.func)
        self.grouped = self.app.task(name=grouped.name, group_by="tenant",
                                     ignore_result=True)(grouped.func)
        self.workers = Workers("minitask.bench.fair", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the fair-queue bench's worker")
        self.messages = queue_keys(self.app_name, "default").messages

    def close(self) -> None:
        self.workers.stop()
        purge(self.client, self.app_name)
        self.app.close()
        self.client.close()

    def wait(self) -> Dict[str, float]:
        """A backlog of BACKLOG in group A, then one task of group B: the fetches (one
        task each) until B's is leased, the tasks leased before it, and the ms from
        B's send to its lease."""
        self.grouped.delay_many([("A", index) for index in range(BACKLOG)])
        start = time.perf_counter()
        handle = self.grouped.delay("B", 0)
        queues, fetches, ahead = self.app.broker.queues, 0, 0
        while fetches <= BACKLOG + 1:
            fetches += 1
            found = queues.fetch("default", now_ms=int(time.time() * 1000),
                                 lease_ms=600_000, count=1, max_deliveries=5)
            if any(delivery.task_id == handle.id for delivery in found.deliveries):
                break
            ahead += len(found.deliveries)
        else:
            raise BrokerError("the fair-queue bench never leased group B's task")
        return {"fetches": fetches, "ahead": ahead,
                "ms": (time.perf_counter() - start) * 1000}

    def fill(self, kind: str) -> None:
        if kind == "ungrouped":
            self.plain.delay_many([("p", index) for index in range(TASKS)])
        else:
            self.grouped.delay_many([(f"t{index}" if kind == "groups of one" else "one", index)
                                     for index in range(TASKS)])

    def drain(self, kind: str, tally: Tally) -> float:
        """Tasks a second of a drain of TASKS tasks of ``kind``, timed from the worker's
        first task taken to the queue empty (the queue filled first, the worker paused
        meanwhile: it is started for each drain)."""
        self.fill(kind)
        worker = self.workers.start(*WORKER)
        try:
            deadline = time.monotonic() + 60
            while self.client.hlen(self.messages) >= TASKS:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise BrokerError("the fair-queue bench's worker took no task")
                time.sleep(0.0005)
            with tally.window(self.client, [worker.pid], TASKS):
                start = time.perf_counter()
                deadline = time.monotonic() + 300
                while self.client.hlen(self.messages):
                    if time.monotonic() > deadline:
                        raise BrokerError("the fair-queue bench's worker did not drain")
                    time.sleep(0.002)
                elapsed = time.perf_counter() - start
        finally:
            self.workers.stop()
        return TASKS / elapsed


def measure_fair(url: str, drain_rounds: int = DRAIN_ROUNDS,
                 capacity: Optional[Capacity] = None) -> List[Dict[str, Any]]:
    """The fair-queue rows, as ``bench.Row`` keyword arguments (fewer ``drain_rounds``:
    quicker, rougher ratios, for a test that checks the rows run); the CPU per task
    of the drains goes to ``capacity`` when given."""
    bench = FairBench(url)
    try:
        logger.info("fair queues: one task of group B behind %d of group A", BACKLOG)
        wait = bench.wait()
        bench.close()
        bench = FairBench(url)
        logger.info("fair queues: drains of %d tasks, ungrouped and grouped", TASKS)
        rates: Dict[str, List[float]] = {kind: [] for kind in KINDS}
        tallies = {kind: Tally() for kind in KINDS}
        for round_number in range(drain_rounds):
            shift = round_number % len(KINDS)
            for kind in KINDS[shift:] + KINDS[:shift]:
                rates[kind].append(bench.drain(kind, tallies[kind]))
    finally:
        bench.close()
    if capacity is not None:
        how = f"a drain by one worker ({' '.join(WORKER)}), {drain_rounds} x {TASKS:,} no-ops"
        for kind in KINDS[1:]:
            capacity.add(f"fair queues: grouped, {kind}", tallies[kind].redis_us,
                         tallies[kind].worker_us, how)
    rows: List[Dict[str, Any]] = [
        {"metric": f"group B's task behind group A's {BACKLOG:,} ready: fetches",
         "value": wait["fetches"], "unit": "fetches", "target": "<= 3",
         "met": wait["fetches"] <= 3,
         "detail": f"fetches of one task until B's was leased ({wait['ahead']:.0f} of A's "
                   f"before it, {wait['ms']:.1f} ms from its send); ungrouped it would "
                   f"wait behind all {BACKLOG:,}"}]
    for kind in KINDS[1:]:
        ratios = sorted(grouped_rate / plain_rate for grouped_rate, plain_rate
                        in zip(rates[kind], rates["ungrouped"]))
        ratio = median(ratios)
        rows.append({
            "metric": f"drain of {TASKS:,} grouped ({kind}) vs ungrouped",
            "value": ratio * 100, "unit": "%", "target": ">= 80 %", "met": ratio >= 0.8,
            "detail": f"median of {drain_rounds} rounds (rounds {ratios[0] * 100:.0f}-"
                      f"{ratios[-1] * 100:.0f} %): {median(rates[kind]):,.0f} tasks/s "
                      f"grouped, {median(rates['ungrouped']):,.0f} ungrouped; one worker "
                      f"({' '.join(WORKER)}); Redis CPU {tallies[kind].redis_us:.0f} us a "
                      f"task grouped, {tallies['ungrouped'].redis_us:.0f} ungrouped"})
    return rows
