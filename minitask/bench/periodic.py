"""The periodic rows of ``minitask bench``: how late ticks start with three workers
racing for them, and what 100 schedules cost an idle worker.

Like the rest of the bench it runs under a throwaway app name, starts and stops
its own worker processes (``-A minitask.bench.periodic:app``) and deletes its
keys when done.
"""
from __future__ import annotations

import datetime as _dt
import os
import time
from typing import Any, Dict, List

import redis

from ..app import Minitask
from ..broker.keys import AppKeys
from ..context import current_task
from ..errors import BrokerError
from ..printable import own_logger
from .report import Row, percentile
from .scratch import BENCH, late_key, purge
from .workers import Workers

logger = own_logger(__name__)

APP_ENV = "MINITASK_BENCH_PERIODIC_APP"
#: Redis commands the bench itself sends while it measures an idle worker.
OURS = ("info",)

#: The app the bench's worker processes load with ``-A minitask.bench.periodic:app``.
app = Minitask(os.environ.get(APP_ENV, f"{BENCH}-periodic"))
_marks: List[Any] = []


@app.task(ignore_result=True)
def ticked() -> None:
    """Record how long after its tick this run started (ms; negative would be early)."""
    context = current_task()
    assert context is not None and context.eta is not None
    late_ms = (time.time() - context.eta.timestamp()) * 1000.0
    if not _marks:
        _marks.append(redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]))
    _marks[0].rpush(late_key(app.name), f"{context.id} {late_ms:.3f}")


@app.task(ignore_result=True)
def dormant() -> None:
    """The task of the idle cost's schedules, none of which is due while it is measured."""


class PeriodicBench:
    """Tick lateness and the idle cost of schedules, against one Redis URL."""

    def __init__(self, url: str, *, seconds: float = 10.0, every: float = 0.05,
                 workers: int = 3, idle_seconds: float = 10.0, schedules: int = 100) -> None:
        self.url = url
        self.seconds = seconds
        self.every = every
        self.workers_wanted = workers
        self.idle_seconds = idle_seconds
        self.schedules = schedules
        self.app_name = f"{BENCH}-periodic-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.workers = Workers("minitask.bench.periodic", app_env=APP_ENV, url=url,
                               app_name=self.app_name, label="the periodic bench's workers")

    def run(self) -> List[Row]:
        try:
            return self.lateness() + self.idle_cost()
        finally:
            self.cleanup()

    # -- plumbing ------------------------------------------------------------

    def _app(self) -> Minitask:
        producer = Minitask(self.app_name, broker=self.url)
        for task in app.tasks.values():
            producer.task(name=task.name, ignore_result=True)(task.func)
        return producer

    def _start_workers(self, count: int, *args: str) -> None:
        """``count`` workers, once each is registered and blocked in its wait."""
        for _ in range(count):
            self.workers.start(*args)
        key = AppKeys(self.app_name).workers
        self.workers.wait_for(lambda: self.client.zcard(key) >= count
                              and self._blocked() >= count)

    def _blocked(self) -> int:
        return int(self.client.info("clients")["blocked_clients"])

    def cleanup(self) -> None:
        self.workers.stop()
        purge(self.client, self.app_name, late_key(self.app_name))

    def _calls(self) -> Dict[str, int]:
        stats = self.client.info("commandstats")
        return {name[len("cmdstat_"):]: int(value["calls"]) for name, value in stats.items()}

    def _calls_per_second(self) -> float:
        """Calls per second over whole wait cycles of the idle worker (each ends with
        a BLPOP served or timed out): a window cut mid-cycle would count one cycle
        more or less, far more than any difference measured here."""
        cycles = max(1, round(self.idle_seconds / 5.0))
        self._next_cycle()
        before = self._calls()
        started = time.monotonic()
        for _ in range(cycles):
            self._next_cycle()
        after = self._calls()
        elapsed = time.monotonic() - started
        made = sum(count - before.get(name, 0) for name, count in after.items()
                   if name not in OURS)
        return made / elapsed

    def _next_cycle(self) -> None:
        """Return as the idle worker's next BLPOP ends (its count goes up)."""
        start = self._calls().get("blpop", 0)
        deadline = time.monotonic() + 30.0
        while self._calls().get("blpop", 0) == start:
            if time.monotonic() > deadline:
                raise BrokerError("the idle bench worker made no BLPOP within 30 s")
            time.sleep(0.01)

    # -- measurements --------------------------------------------------------

    def lateness(self) -> List[Row]:
        """Three workers, a schedule every ``every`` s for ``seconds``: how late each
        run starts after its tick, and whether every tick ran exactly once."""
        logger.info("periodic: %d workers, every=%s s for %s s", self.workers_wanted,
                    self.every, self.seconds)
        producer = self._app()
        self._start_workers(self.workers_wanted, "--pool", "thread", "-c", "1")
        producer.add_schedule("bench-ticks", producer.tasks[ticked.name], every=self.every)
        time.sleep(self.seconds)  # the ticks run meanwhile
        producer.remove_schedule("bench-ticks")
        time.sleep(0.5)  # the last runs finish
        self.workers.stop()
        producer.close()
        found: List[bytes] = self.client.lrange(  # type: ignore[assignment]
            late_key(self.app_name), 0, -1)
        rows = [line.decode().split() for line in found]
        late = [float(value) for _, value in rows]
        ids = [task_id for task_id, _ in rows]
        if not late:
            return [Row("periodic tick lateness p99", float("nan"), "ms", "<= 5 ms", False,
                        "no tick ran")]
        period_ms = round(self.every * 1000)
        ticks = sorted(_tick_ms(task_id) for task_id in set(ids))
        expected = (ticks[-1] - ticks[0]) // period_ms + 1
        twice = len(ids) - len(set(ids))
        missing = expected - len(ticks)
        p50, p99, early = percentile(late, 0.5), percentile(late, 0.99), min(late)
        detail = (f"{self.workers_wanted} workers, every {self.every} s for {self.seconds} s: "
                  f"{len(ticks)} ticks")
        return [
            Row("periodic tick lateness p50", p50, "ms", "<= 2 ms", p50 <= 2.0, detail),
            Row("periodic tick lateness p99", p99, "ms", "<= 5 ms", p99 <= 5.0),
            Row("periodic earliest start vs tick", early, "ms", ">= 0 (never early)",
                early >= 0.0),
            Row("periodic ticks run twice or missed", float(twice + missing), "ticks", "0",
                twice + missing == 0, f"{twice} twice, {missing} missed"),
        ]

    def idle_cost(self) -> List[Row]:
        """Redis calls per second of an idle worker, without and with 100 schedules."""
        logger.info("periodic: idle worker, no schedules, then %d", self.schedules)
        producer = self._app()
        self._start_workers(1, "--pool", "process", "-c", "1")
        bare = self._calls_per_second()
        task = producer.tasks[dormant.name]
        for index in range(self.schedules):
            # a year apart, from different phases: none falls due while measured
            producer.add_schedule(f"bench-idle-{index}", task, every=31_536_000.0 + index)
        time.sleep(1.0)  # the worker, woken by the change, reads them and blocks again
        loaded = self._calls_per_second()
        self.workers.stop()
        producer.close()
        return [
            Row("idle worker Redis calls/s, no schedules", bare, "calls/s", "-", None,
                "commands scripts call included"),
            Row(f"idle worker Redis calls/s, {self.schedules} schedules", loaded, "calls/s",
                "<= no schedules + 0.2", loaded <= bare + 0.2,
                f"{loaded - bare:+.2f} calls/s over no schedules"),
        ]


def _tick_ms(task_id: str) -> int:
    """The tick a run's id names (``name@2026-01-01T00:00:00.050Z``), in Unix ms."""
    stamp = task_id.rsplit("@", 1)[1]
    moment = _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return round(moment.replace(tzinfo=_dt.timezone.utc).timestamp() * 1000)
