"""What the main rows of one ``minitask bench`` run share: the Redis, a throwaway
app, its worker processes and the report. The rows take turns with it, and each
leaves no worker and no key behind (``cleanup``)."""
from __future__ import annotations

import os
import subprocess
import time

import redis

from ..app import Minitask
from ..broker.connection import broker_errors, connect, mask_url
from ..broker.keys import queue_keys
from ..errors import BrokerError, ConfigurationError
from .report import Report
from .scratch import BASELINE, BENCH, SOURCE, WAKE, WAKE_REPLY, WORK, purge
from .tasks import APP_ENV, app as main_app
from .workers import Workers, children


#: The URLs the bench measures: one Redis server, which its rows, baselines and
#: workers reach with redis-py's ``from_url`` (a cluster, a sentinel's or the
#: embedded broker they cannot).
SCHEMES = ("redis", "rediss", "unix")


def check_url(url: str) -> None:
    """Check ``url`` and reach its Redis through minitask's own ``connect`` (as the
    app and the other commands do) before anything is measured: a URL minitask
    refuses, or a Redis it cannot reach, ends the bench with one line, not a
    traceback from the first row.

    Raises:
        ConfigurationError: a scheme the bench cannot measure (``SCHEMES`` only), or
            a URL ``connect`` refuses (an unknown option, a malformed URL).
        BrokerError: the Redis could not be reached (with the connect's hint).
    """
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise ConfigurationError(
            f"minitask bench measures one Redis server, at a redis://, rediss:// or "
            f"unix:// URL, not {mask_url(url)!r}; or pass --start-server for a "
            f"throwaway one")
    connection = connect(url)
    try:
        with broker_errors("reach the Redis to measure", connection.description):
            connection.client.ping()
    finally:
        connection.client.close()


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
