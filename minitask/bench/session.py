"""What the main rows of one ``minitask bench`` run share: the Redis, a throwaway
app, its worker processes and the report. The rows take turns with it, and each
leaves no worker and no key behind (``cleanup``)."""
from __future__ import annotations

import os
import subprocess
import time

import redis

from ..app import Minitask
from ..broker.keys import queue_keys
from ..errors import BrokerError
from .report import Report
from .scratch import BASELINE, BENCH, SOURCE, WAKE, WAKE_REPLY, WORK, purge
from .tasks import APP_ENV, app as main_app
from .workers import Workers, children


class Session:
    """One bench run's Redis (``url``), sizes, app name, workers and report."""

    def __init__(self, url: str, *, tasks: int, memory_tasks: int) -> None:
        self.url = url
        self.tasks = tasks
        self.memory_tasks = memory_tasks
        self.app_name = f"{BENCH}-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.report = Report()
        self.workers = Workers("minitask.bench.tasks", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the bench's worker")

    def app(self) -> Minitask:
        """A producer of the bench's tasks, under the run's app name."""
        bench_app = Minitask(self.app_name, broker=self.url)
        for task in main_app.tasks.values():
            bench_app.task(name=task.name, ignore_result=task.options.ignore_result)(task.func)
        return bench_app

    def pending(self, queue: str = "default") -> int:
        """Tasks of ``queue`` not done yet (queued, delayed or running)."""
        return int(self.client.hlen(queue_keys(self.app_name, queue).messages))

    def wait_taking(self, worker: "subprocess.Popen[bytes]", processes: int,
                    queued: int) -> None:
        """Return once ``worker`` has its ``processes`` pool processes and has taken the
        first of the ``queued`` tasks: where a drain's clock starts."""
        self.workers.wait_for(lambda: (self.pending() < queued
                                       and len(list(children(worker.pid))) >= processes),
                              timeout=60, interval=0.0005)

    def wait_drained(self, timeout: float) -> float:
        """Wait for the default queue to hold no task; returns ``perf_counter()`` then."""
        deadline = time.monotonic() + timeout
        while self.pending():
            if time.monotonic() > deadline:
                raise BrokerError(f"bench workers did not drain the queue within {timeout} s")
            time.sleep(0.005)
        return time.perf_counter()

    def cleanup(self) -> None:
        """Stop every worker; delete the app's keys and the baselines'."""
        self.workers.stop()
        purge(self.client, self.app_name, BASELINE, SOURCE, WORK, WAKE, WAKE_REPLY)
