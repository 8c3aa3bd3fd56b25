"""``minitask bench --scaling``'s tables: drain rate and idle pickup latency with 1,
2, 4 and 8 worker processes and behind a delayed backlog, and what ``delay()`` and
a fetch + ack cost as the queue grows."""
from __future__ import annotations

import time
from typing import Any, Dict

from ..app import Minitask
from ..errors import BrokerError
from .report import percentile, progress
from .session import Session
from .tasks import noop, started_at


class ScalingRows:
    """Fills ``session.report.scaling``: one entry per point measured."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def scale(self) -> None:
        progress("scaling: 1, 2, 4, 8 worker processes; delayed backlog; queue length")
        session = self.session
        scaling = session.report.scaling
        bench_app = session.app()
        for processes in (1, 2, 4, 8):
            scaling.append({"worker_processes": processes, "delayed_pending": 0,
                            **self._point(bench_app, processes, 0)})
        for pending in (10, 100, 10_000):
            scaling.append({"worker_processes": 1, "delayed_pending": pending,
                            **self._point(bench_app, 1, pending)})
        task = bench_app.tasks[noop.name]
        queued = 0
        for length in sorted({1_000, session.memory_tasks // 10, session.memory_tasks} - {0}):
            while queued < length:
                size = min(1000, length - queued)
                task.delay_many((index,) for index in range(size))
                queued += size
            n = 2000
            start = time.perf_counter()
            for index in range(n):
                task.delay(index)
            enqueue_us = (time.perf_counter() - start) / n * 1e6
            broker = bench_app.broker
            start = time.perf_counter()
            for _ in range(n):
                fetched = broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                              lease_ms=60_000, count=1, max_deliveries=5)
                broker.results.ack("default", fetched.deliveries[0].task_id, None, 0)
            fetch_us = (time.perf_counter() - start) / n * 1e6
            scaling.append({"queue_length": length, "delay_us": round(enqueue_us, 1),
                            "fetch_plus_ack_us": round(fetch_us, 1)})
        session.cleanup()

    def _point(self, bench_app: Minitask, processes: int, pending: int) -> Dict[str, Any]:
        """Drain rate and idle pickup latency with ``pending`` tasks delayed an hour."""
        session = self.session
        task = bench_app.tasks[noop.name]
        for index in range(pending):
            task.apply_async((index,), delay=3600.0)
        task.delay_many((index,) for index in range(session.tasks))
        worker = session.workers.start("--pool", "process", "-c", str(processes))
        session.wait_taking(worker, processes, session.tasks + pending)
        start = time.perf_counter()
        while session.pending() > pending:
            if time.perf_counter() - start > 120:
                raise BrokerError("scaling run did not drain")
            time.sleep(0.002)
        rate = session.tasks / (time.perf_counter() - start)
        time.sleep(0.3)  # every child back in its blocking wait
        timed = bench_app.tasks[started_at.name]
        delays = []
        for _ in range(50):
            delays.append(timed.delay(time.time()).get(timeout=10) * 1000.0)
            time.sleep(0.002)
        session.cleanup()
        return {"drain_tasks_per_s": round(rate),
                "pickup_p50_ms": round(percentile(delays, 0.5), 2),
                "pickup_p99_ms": round(percentile(delays, 0.99), 2)}
