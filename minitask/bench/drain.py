"""``minitask bench``'s throughput rows: the bare redis-py baselines, ``delay()`` and
``delay_many()`` beside them, and worker processes draining a queue filled beforehand."""
from __future__ import annotations

import os
import time
from typing import Dict, List

from .capacity import Tally, redis_cpu_seconds
from .report import Row, progress
from .scratch import BASELINE, SOURCE, WORK
from .session import Session
from .tasks import RECENT_ENV, kept, noop
from .workers import CpuMeter, children


class ThroughputRows:
    """Tasks per second in and out, each beside a bare loop on the same Redis."""

    def __init__(self, session: Session) -> None:
        self.session = session
        #: the -c 1 drain rate, by prefetch: what the -c 2 drain is compared with
        self._drain_one: Dict[int, float] = {}
        #: Redis CPU per task (us) of the -c 1 drain with the record of recent outcomes.
        self._redis_one: Dict[int, float] = {}
        #: Redis CPU per delay() (INFO cpu), once the enqueue row has run
        self.delay_redis_us = 0.0

    def baselines(self) -> None:
        progress("baselines: bare redis-py loops")
        client, n = self.session.client, self.session.tasks
        start = time.perf_counter()
        for index in range(n):
            client.set(BASELINE, index)
        single = n / (time.perf_counter() - start)
        pipe = client.pipeline(transaction=False)
        for index in range(n):
            pipe.rpush(SOURCE, index)
        pipe.execute()
        start = time.perf_counter()
        for _ in range(n):
            item = client.lmove(SOURCE, WORK)
            client.lrem(WORK, 1, item)  # type: ignore[arg-type]
        two = n / (time.perf_counter() - start)
        self.session.report.baselines = {"single command loop (SET)": single,
                                         "two round trips per item (LMOVE + LREM)": two}

    def enqueue(self) -> None:
        progress("enqueue: delay() one at a time, delay_many() in batches of 1,000")
        session = self.session
        report = session.report
        task = session.app().tasks[noop.name]
        n = session.tasks
        task.delay(0)
        # in blocks alternating with the SET loop, so both see the same load on the machine
        spent = baseline = redis_cpu = 0.0
        for block in range(10):
            start = time.perf_counter()
            for index in range(n // 10):
                session.client.set(BASELINE, index)
            middle = time.perf_counter()
            cpu_before = redis_cpu_seconds(session.client)
            for index in range(n // 10):
                task.delay(index)
            spent += time.perf_counter() - middle
            redis_cpu += redis_cpu_seconds(session.client) - cpu_before
            baseline += middle - start
        self.delay_redis_us = redis_cpu / (n // 10 * 10) * 1e6
        rate = n // 10 * 10 / spent
        single = n // 10 * 10 / baseline
        report.baselines["single command loop (SET), beside delay()"] = single
        report.add(Row("delay() one call at a time", rate, "tasks/s",
                       ">= 10,000/s and >= 0.6 x SET loop",
                       rate >= 10_000 and rate >= 0.6 * single,
                       f"{rate / single:.2f} x the SET loop; Redis CPU "
                       f"{self.delay_redis_us:.1f} us per call (INFO cpu)"))
        many = n * 5
        batch = [(index,) for index in range(1000)]
        start = time.perf_counter()
        for _ in range(many // 1000):
            task.delay_many(batch)
        rate = many / (time.perf_counter() - start)
        report.add(Row("delay_many() in batches of 1,000", rate, "tasks/s", ">= 50,000/s",
                       rate >= 50_000))
        session.cleanup()

    def drain(self, concurrency: int, prefetch: int, record: bool = True) -> None:
        """Drain a queue filled beforehand, so the producer's CPU is not in the window;
        ``record`` False: with ``recent_outcomes=0``, to state what the record costs."""
        session = self.session
        progress(f"drain: {session.tasks:,} no-op tasks, --pool process -c {concurrency} "
                 f"--prefetch {prefetch}{'' if record else ', no outcome record'}")
        task = session.app().tasks[noop.name]
        task.delay_many((index,) for index in range(session.tasks))
        worker = session.workers.start("--pool", "process", "-c", str(concurrency),
                                       "--prefetch", str(prefetch),
                                       env=None if record else {RECENT_ENV: "0"})
        session.wait_taking(worker, concurrency, session.tasks)  # the first taken: go
        start = time.perf_counter()
        meter = CpuMeter({"worker children": list(children(worker.pid)),
                          "worker supervisor": [worker.pid], "redis-server": self._redis_pids(),
                          "bench (polling)": [os.getpid()]})
        tally = Tally()
        with tally.window(session.client, [worker.pid], session.tasks):
            end = session.wait_drained(timeout=max(60.0, session.tasks / 200))
            cpu = meter.per_task_us(session.tasks)
        self._capacity(f"ignore_result{'' if record else ', recent_outcomes=0'}, "
                       f"process pool -c {concurrency}, prefetch {prefetch}",
                       tally, f"delay() one at a time (the enqueue row), then a drain of "
                              f"{session.tasks:,} no-ops by one worker")
        rate = session.tasks / (end - start)
        session.cleanup()
        busy = sum(cpu.values()) * rate / 1e6
        breakdown = ", ".join(f"{name} {us:.0f}" for name, us in cpu.items())
        detail = f"CPU us/task: {breakdown}; {busy:.2f} of {os.cpu_count()} cores busy"
        two = session.report.baselines["two round trips per item (LMOVE + LREM)"]
        label = f"drain, --pool process -c {concurrency} --prefetch {prefetch}"
        # The targets are for the default prefetch (1); larger ones are for comparison.
        targeted = prefetch == 1
        if not record:
            with_record = self._drain_one[prefetch]
            redis_us = self._redis_one[prefetch]
            session.report.add(Row(f"{label}, recent_outcomes=0", rate, "tasks/s", "-", None,
                                   f"the record of recent outcomes costs "
                                   f"{(1 - with_record / rate) * 100:.1f} % of this rate "
                                   f"({with_record:,.0f}/s with it) and "
                                   f"{redis_us - tally.redis_us:.0f} us of Redis CPU per "
                                   f"task ({redis_us:.0f} with it, INFO cpu); {detail}"))
        elif concurrency == 1:
            self._drain_one[prefetch] = rate
            self._redis_one[prefetch] = tally.redis_us
            session.report.add(Row(label, rate, "tasks/s",
                                   ">= 3,500/s and >= 0.6 x LMOVE+LREM" if targeted else "-",
                                   rate >= 3_500 and rate >= 0.6 * two if targeted else None,
                                   f"{rate / two:.2f} x the two-round-trip loop; {detail}"))
        else:
            one = self._drain_one[prefetch]
            session.report.add(Row(label, rate, "tasks/s",
                                   ">= 1.6 x the -c 1 figure" if targeted else "-",
                                   rate >= 1.6 * one if targeted else None,
                                   f"{rate / one:.2f} x -c 1; {detail}"))

    def kept(self) -> None:
        """A task whose result is kept: delay() one at a time, then a -c 1 drain at
        prefetch 1; its CPU per task only (the drain rows give the rates)."""
        session = self.session
        progress(f"capacity: {session.tasks:,} tasks keeping their result, --pool process -c 1")
        task = session.app().tasks[kept.name]
        sending, draining = Tally(), Tally()
        task.delay(-1)  # connected, its script loaded
        with sending.window(session.client, [], session.tasks - 1):
            for index in range(session.tasks - 1):
                task.delay(index)
        worker = session.workers.start("--pool", "process", "-c", "1", "--prefetch", "1")
        session.wait_taking(worker, 1, session.tasks)
        with draining.window(session.client, [worker.pid], session.tasks):
            session.wait_drained(timeout=max(60.0, session.tasks / 200))
        session.cleanup()
        session.report.capacity.add(
            "result kept, process pool -c 1, prefetch 1",
            sending.redis_us + draining.redis_us, draining.worker_us,
            f"delay() one at a time, then a drain of {session.tasks:,} tasks returning an "
            f"int, kept for a day ({sending.redis_us:.1f} + {draining.redis_us:.1f} us of "
            f"Redis CPU)")

    def _capacity(self, case: str, draining: Tally, how: str) -> None:
        """A capacity entry: the drain's CPU per task, with delay()'s Redis CPU added."""
        redis_us = draining.redis_us + self.delay_redis_us
        self.session.report.capacity.add(
            case, redis_us, draining.worker_us,
            f"{how} ({self.delay_redis_us:.1f} + {draining.redis_us:.1f} us of Redis CPU)")

    def _redis_pids(self) -> List[int]:
        """The server's pid when it runs on this machine (its /proc entry says so)."""
        pid = int(self.session.client.info("server").get("process_id", 0))
        try:
            with open(f"/proc/{pid}/comm") as comm:
                return [pid] if comm.read().startswith("redis") else []
        except OSError:
            return []
