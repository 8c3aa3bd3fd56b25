"""``minitask bench``'s workflow rows: a chord of 1,000 no-op members and a chain
of 100 steps, each beside the same tasks sent plainly, on the same worker.

Runs under a throwaway app name of its own (its worker processes load
``-A minitask.bench.canvas:app``) and deletes its keys when done.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import redis

from ..app import Minitask
from ..canvas import chain, chord, group
from ..errors import BrokerError

logger = logging.getLogger(__name__)

APP_ENV = "MINITASK_BENCH_CANVAS_APP"
MEMBERS = 1000
STEPS = 100
#: Runs of each measurement; the median is reported.
ROUNDS = 3

#: The app the bench's worker processes load.
app = Minitask(os.environ.get(APP_ENV, "minitask-bench-canvas"))


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


def _median(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class WorkflowBench:
    """Owns one worker process (``--pool process -c 2``) and the bench's keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app_name = f"minitask-bench-canvas-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.app = Minitask(self.app_name, broker=url)
        for task in app.tasks.values():
            self.app.task(name=task.name)(task.func)
        self.worker: Optional["subprocess.Popen[bytes]"] = None

    def task(self, function: Any) -> Any:
        return self.app.tasks[function.name]

    def start_worker(self) -> None:
        env = {**os.environ, APP_ENV: self.app_name, "MINITASK_BROKER_URL": self.url}
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "minitask", "worker", "-A", "minitask.bench.canvas:app",
             "--pool", "process", "-c", "2", "--loglevel", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        key = f"minitask:{{{self.app_name}}}:workers"
        deadline = time.monotonic() + 30
        while not self.client.zcard(key):
            if time.monotonic() > deadline or self.worker.poll() is not None:
                raise BrokerError("the workflow bench's worker did not start")
            time.sleep(0.05)
        time.sleep(0.3)  # let the children reach their blocking wait

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGTERM)
            try:
                self.worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait(timeout=10)
        for pattern in (f"minitask:{{{self.app_name}:*", f"minitask:{{{self.app_name}}}:*"):
            batch = list(self.client.scan_iter(match=pattern, count=1000))
            for start in range(0, len(batch), 1000):
                self.client.unlink(*batch[start:start + 1000])
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

    def chord_of_members(self) -> float:
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


def measure_workflows(url: str) -> List[Dict[str, Any]]:
    """The workflow rows, as ``bench.Row`` keyword arguments."""
    bench = WorkflowBench(url)
    try:
        bench.start_worker()
        logger.info("workflows: a chord of %d no-op members, a chain of %d steps", MEMBERS, STEPS)
        plain = _median([bench.plain_batch() for _ in range(ROUNDS)])
        chorded = _median([bench.chord_of_members() for _ in range(ROUNDS)])
        per_task = _median([bench.plain_steps() for _ in range(ROUNDS)])
        drained = _median([bench.plain_drain() for _ in range(ROUNDS)])
        per_step = _median([bench.chain_of_steps() for _ in range(ROUNDS)])
    finally:
        bench.close()
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
