"""``minitask bench``'s durability rows: what waiting for a replica costs.

The bench starts its own primary and one replica on loopback (the Redis it
was given may have none), then measures, in the same run, ``delay()`` one
call at a time with ``durability="replicated"`` beside ``durability=None``,
and a ``-c 1`` worker draining tasks with durable outcomes beside plain ones.
Its worker processes load ``-A minitask.bench.durable:app``.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

import redis

from ..app import Minitask
from ..broker.keys import AppKeys
from ..errors import BrokerError
from ..printable import own_logger
from .capacity import Capacity, Tally
from .report import median
from .scratch import BENCH
from .servers import ThrowawayServer
from .workers import Workers

logger = own_logger(__name__)

APP_ENV = "MINITASK_BENCH_DURABLE_APP"
DURABILITY_ENV = "MINITASK_BENCH_DURABILITY"
#: delay() calls per round, and tasks per drain.
CALLS = 2000
ROUNDS = 3

#: The app the bench's worker processes load.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-durable"),
               durability=os.environ.get(DURABILITY_ENV) or None)


@app.task(ignore_result=True)
def noop(index: int) -> None:
    """The cheapest task: measures the writes, not the work."""


@app.task
def finished_at(sent_at: float) -> float:
    """Seconds from ``sent_at`` (the producer's clock) to the start of this attempt."""
    return time.time() - sent_at


class DurableBench:
    """A primary with one loopback replica, and the bench's apps on it."""

    def __init__(self) -> None:
        self.primary = ThrowawayServer(prefix=f"{BENCH}-durable-")
        try:
            self.replica = ThrowawayServer(replica_of=self.primary.port,
                                           prefix=f"{BENCH}-durable-replica-")
        except BaseException:
            self.primary.stop()
            raise
        self.client = redis.Redis(port=self.primary.port)
        self.replica_client = redis.Redis(port=self.replica.port)
        self.app_name = f"{BENCH}-durable-{os.getpid()}"
        self.workers = Workers("minitask.bench.durable", app_env=APP_ENV, url=self.primary.url,
                               app_name=self.app_name, label="the durability bench's worker")
        try:
            self._wait_for_replica()
        except BaseException:  # no replica, or interrupted: no server left running
            self.close()
            raise

    def _wait_for_replica(self) -> None:
        deadline = time.monotonic() + 30
        replica = redis.Redis(port=self.replica.port)
        while True:
            try:
                if replica.info("replication").get("master_link_status") == "up" \
                        and int(self.client.wait(1, 100)) >= 1:
                    replica.close()
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise BrokerError("the durability bench's replica did not connect")
            time.sleep(0.05)

    def app(self, durability: Optional[str]) -> Minitask:
        bench_app = Minitask(self.app_name, broker=self.primary.url, durability=durability)
        for task in app.tasks.values():
            bench_app.task(name=task.name, ignore_result=task.options.ignore_result)(task.func)
        return bench_app

    def one_at_a_time(self, durability: Optional[str]) -> float:
        """Seconds per delay(), one call after the other."""
        bench_app = self.app(durability)
        try:
            task = bench_app.tasks[noop.name]
            task.delay(-1)  # connect, load the script
            start = time.perf_counter()
            for index in range(CALLS):
                task.delay(index)
            return (time.perf_counter() - start) / CALLS
        finally:
            self.client.delete(*bench_app.broker.queues.keys("default").ready)
            bench_app.close()

    def drain(self, durability: Optional[str], primary: Tally, replica: Tally) -> float:
        """Seconds per task for a ``-c 1`` worker whose outcomes use ``durability``; the
        CPU per task of the primary and the worker, and of the replica, is added to
        ``primary`` and ``replica``."""
        self.start_worker(durability)
        bench_app = self.app(None)
        try:
            workers = [p.pid for p in self.workers.processes]
            with primary.window(self.client, workers, CALLS), \
                    replica.window(self.replica_client, [], CALLS):
                sent_at = time.time()
                bench_app.tasks[noop.name].delay_many([(index,) for index in range(CALLS - 1)])
                took: float = bench_app.tasks[finished_at.name].delay(sent_at).get(timeout=120)
            return took / CALLS
        finally:
            bench_app.close()
            self.stop_worker()

    def start_worker(self, durability: Optional[str]) -> None:
        self.workers.start("--pool", "process", "-c", "1",
                           env={DURABILITY_ENV: durability or ""})
        self.workers.wait_registered(self.client, 1)  # and its child in its blocking wait

    def stop_worker(self) -> None:
        """Stop the worker; forget it, so that the next one's start is waited for."""
        self.workers.stop()
        self.client.delete(AppKeys(self.app_name).workers)

    def close(self) -> None:
        self.stop_worker()
        self.client.close()
        self.replica_client.close()
        self.replica.stop()
        self.primary.stop()


def measure_durability(capacity: Optional[Capacity] = None) -> List[Dict[str, Any]]:
    """The durability rows, as ``bench.Row`` keyword arguments; the drains' CPU per
    task goes to ``capacity`` when given."""
    bench = DurableBench()
    try:
        logger.info("durability: %d delay() calls one at a time, and a -c 1 drain of %d "
                    "tasks, with and without a replica's confirmation", CALLS, CALLS)
        plain: List[float] = []
        durable: List[float] = []
        for _ in range(ROUNDS):  # interleaved, so that both see the same machine
            plain.append(bench.one_at_a_time(None))
            durable.append(bench.one_at_a_time("replicated"))
        plain_call, durable_call = median(plain), median(durable)
        drains: Dict[Optional[str], List[float]] = {None: [], "replicated": []}
        cpu = {durability: (Tally(), Tally()) for durability in drains}
        for _ in range(ROUNDS):
            for durability in drains:
                drains[durability].append(bench.drain(durability, *cpu[durability]))
        plain_drain, durable_drain = median(drains[None]), median(drains["replicated"])
    finally:
        bench.close()
    if capacity is not None:
        for durability, case in (("replicated", "durability='replicated' outcomes"),
                                 (None, "the same with durability=None")):
            primary, replica = cpu[durability]
            capacity.add(f"{case}, process pool -c 1, prefetch 1", primary.redis_us,
                         primary.worker_us,
                         f"its own primary and one loopback replica (replica: "
                         f"{replica.redis_us:.1f} us per task); delay_many() then a drain "
                         f"of {CALLS:,} tasks, {ROUNDS} rounds; results not kept")
    return [
        {"metric": "delay() one at a time, durability='replicated'",
         "value": 1 / durable_call, "unit": "tasks/s", "target": "-", "met": None,
         "detail": f"{durable_call * 1e6:,.0f} us per call; durability=None in the same run: "
                   f"{1 / plain_call:,.0f} tasks/s, {plain_call * 1e6:,.0f} us per call "
                   f"({durable_call / plain_call:.2f} x); one loopback replica"},
        {"metric": "drain -c1, durable outcomes ('replicated')",
         "value": 1 / durable_drain, "unit": "tasks/s", "target": "-", "met": None,
         "detail": f"{durable_drain * 1e6:,.0f} us per task; outcomes with durability=None: "
                   f"{1 / plain_drain:,.0f} tasks/s ({durable_drain / plain_drain:.2f} x)"},
    ]
