"""``minitask bench``'s workflow rows: a chord of 1,000 no-op members and a chain
of 100 steps, each beside the same tasks sent plainly, on the same worker.

Runs under a throwaway app name of its own (its worker processes load
``-A minitask.bench.canvas:app``) and deletes its keys when done.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

import redis

from ..app import Minitask
from ..canvas import chain, chord, group
from ..printable import own_logger
from .capacity import Capacity, Tally
from .report import median
from .scratch import BENCH, purge
from .workers import Workers

logger = own_logger(__name__)

APP_ENV = "MINITASK_BENCH_CANVAS_APP"
MEMBERS = 1000
STEPS = 100
#: Runs of each measurement; the median is reported.
ROUNDS = 3

#: The app the bench's worker processes load.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-canvas"))


@app.task
def member(index: int) -> None:
    """A no-op chord member or plain task."""


@app.task
def body(results: List[Any], sent_at: float) -> float:
    """Seconds from ``sent_at`` (the producer's clock) to the start of the body."""
    return time.time() - sent_at


@app.task
def hop(previous: Any = None) -> None:
    """A no-op chain step."""


@app.task
def arrived(previous: Any, sent_at: float) -> float:
    """The last step: seconds from ``sent_at`` to its start."""
    return time.time() - sent_at


class WorkflowBench:
    """Owns one worker process (``--pool process -c 2``) and the bench's keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app_name = f"{BENCH}-canvas-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.app = Minitask(self.app_name, broker=url)
        for task in app.tasks.values():
            self.app.task(name=task.name)(task.func)
        self.workers = Workers("minitask.bench.canvas", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the workflow bench's worker")

    def task(self, function: Any) -> Any:
        return self.app.tasks[function.name]

    def start_worker(self) -> None:
        self.workers.start("--pool", "process", "-c", "2")
        self.workers.wait_registered(self.client, 1)  # and its children in their wait

    def close(self) -> None:
        self.workers.stop()
        purge(self.client, self.app_name)
        self.app.close()
        self.client.close()

    def plain_batch(self) -> float:
        """Seconds from sending 1,000 no-op tasks to the start of one sent behind them."""
        sent_at = time.time()
        self.task(member).delay_many([(index,) for index in range(MEMBERS)])
        # the worker's two children finish the batch about when this one starts
        handle = self.task(body).delay([], sent_at)
        started: float = handle.get(timeout=120)
        return started

    def chord_of_members(self, tally: Tally) -> float:
        """Seconds from sending a chord of MEMBERS to its body's start; its CPU per
        member is added to ``tally``."""
        with tally.window(self.client, [p.pid for p in self.workers.processes], MEMBERS):
            sent_at = time.time()
            handle = chord(group(self.task(member).s(index) for index in range(MEMBERS)),
                           self.task(body).s(sent_at)).delay()
            started: float = handle.get(timeout=120)
        return started

    def plain_steps(self) -> float:
        """Seconds per task for tasks sent one after the other, each once the one
        before has finished (what a chain does, by hand)."""
        start = time.perf_counter()
        for _ in range(STEPS - 1):
            self.task(hop).delay().get(timeout=60)
        self.task(arrived).delay(None, 0.0).get(timeout=60)
        return (time.perf_counter() - start) / STEPS

    def plain_drain(self) -> float:
        """Seconds per task for the same tasks sent at once (the two children share them)."""
        sent_at = time.time()
        self.task(hop).delay_many([() for _ in range(STEPS - 1)])
        started: float = self.task(arrived).delay(None, sent_at).get(timeout=60)
        return started / STEPS

    def chain_of_steps(self) -> float:
        sent_at = time.time()
        steps = [self.task(hop).s() for _ in range(STEPS - 1)]
        handle = chain(*steps, self.task(arrived).s(sent_at)).delay()
        started: float = handle.get(timeout=120)
        return started / STEPS


def measure_workflows(url: str, capacity: Optional[Capacity] = None) -> List[Dict[str, Any]]:
    """The workflow rows, as ``bench.Row`` keyword arguments; a chord member's CPU goes
    to ``capacity`` when given."""
    bench = WorkflowBench(url)
    chords = Tally()
    try:
        bench.start_worker()
        logger.info("workflows: a chord of %d no-op members, a chain of %d steps", MEMBERS, STEPS)
        plain = median([bench.plain_batch() for _ in range(ROUNDS)])
        chorded = median([bench.chord_of_members(chords) for _ in range(ROUNDS)])
        per_task = median([bench.plain_steps() for _ in range(ROUNDS)])
        drained = median([bench.plain_drain() for _ in range(ROUNDS)])
        per_step = median([bench.chain_of_steps() for _ in range(ROUNDS)])
    finally:
        bench.close()
    if capacity is not None:
        capacity.add("a chord member (its result joined), process pool -c 2",
                     chords.redis_us, chords.worker_us,
                     f"{ROUNDS} chords of {MEMBERS:,} no-op members sent and run, the body "
                     f"included, per member")
    return [
        {"metric": f"chord of {MEMBERS:,}: delay() to body start", "value": chorded * 1000,
         "unit": "ms", "target": "-", "met": None,
         "detail": f"the same {MEMBERS:,} tasks sent plainly, then one more: "
                   f"{plain * 1000:,.0f} ms to its start; overhead "
                   f"{(chorded - plain) * 1000:,.0f} ms ({chorded / plain:.2f} x), "
                   f"{(chorded - plain) / MEMBERS * 1e6:,.0f} us per member"},
        {"metric": f"chain of {STEPS}: time per step", "value": per_step * 1000, "unit": "ms",
         "target": "-", "met": None,
         "detail": f"plain tasks: {per_task * 1000:.2f} ms each when a client sends each once "
                   f"the one before finished (delay() + get()), {drained * 1000:.2f} ms each "
                   f"when sent at once and run two at a time"},
    ]
