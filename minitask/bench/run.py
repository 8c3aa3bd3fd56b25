"""``minitask bench``: throughput, latency and memory, beside bare redis-py baselines.

``run_bench`` runs every row in turn and prints the report. Everything runs under
throwaway app names, so user data is never touched, and the bench deletes its own
keys and stops its own processes when done.
"""
from __future__ import annotations

import os
import socket
import sys
from typing import Callable, Optional, Sequence

from ..errors import ConfigurationError
from .drain import ThroughputRows
from .latency import LatencyRows
from .memory import measure_memory
from .periodic import PeriodicBench
from .report import Report, Row, progress
from .scaling import ScalingRows
from .servers import ThrowawayServer
from .session import Session, check_url


class Bench:
    """Runs every measurement against one Redis URL, in the report's order."""

    def __init__(self, url: str, *, tasks: int, memory_tasks: int, scaling: bool,
                 prefetch: Sequence[int] = (1, 100)) -> None:
        self.session = Session(url, tasks=tasks, memory_tasks=memory_tasks)
        self.url = url
        self.prefetch = list(prefetch)
        self.scaling = scaling
        self.report = self.session.report

    def run(self) -> Report:
        info = self.session.client.info("server")
        self.report.machine = {"cpus": os.cpu_count(), "redis_version": info["redis_version"],
                               "python": sys.version.split()[0], "host": socket.gethostname()}
        throughput = ThroughputRows(self.session)
        latency = LatencyRows(self.session)
        try:
            throughput.baselines()
            throughput.enqueue()
            self.producer_rows()
            for prefetch in self.prefetch:
                throughput.drain(1, prefetch)
                throughput.drain(1, prefetch, record=False)
                throughput.drain(2, prefetch)
            throughput.kept()
            self.asyncio_rows()
            latency.latency()
            latency.delayed()
            self.periodic()
            self.workflows()
            self.broadcasts()
            self.durability()
            self.flow()
            self.fair()
            self.dashboard()
            measure_memory(self.session)
            if self.scaling:
                ScalingRows(self.session).scale()
        finally:
            self.session.cleanup()
        return self.report

    # -- each feature's rows, from its own module ------------------------------

    def producer_rows(self) -> None:
        """delay() beside a bare LPUSH; 20 mixed calls in one app.batch() block."""
        from .producer import measure_producer
        for row in measure_producer(self.url, self.session.app_name, self.session.tasks,
                                    progress):
            self.report.add(Row(**row))

    def asyncio_rows(self) -> None:
        """adelay() against a redis.asyncio SET loop; the asyncio pool draining sleeps."""
        from .coroutines import measure  # asyncio machinery only when measured
        for metric, value, unit, target, met, detail in measure(
                self.url, self.session.app_name, self.session.tasks, progress):
            self.report.add(Row(metric, value, unit, target, met, detail))

    def periodic(self) -> None:
        """Tick lateness with three workers, and the idle cost of 100 schedules."""
        for row in PeriodicBench(self.url).run():
            self.report.add(row)

    def workflows(self) -> None:
        """A chord of 1,000 and a chain of 100, beside the same tasks sent plainly."""
        from .canvas import measure_workflows  # its app, only when it runs
        for row in measure_workflows(self.url, capacity=self.report.capacity):
            self.report.add(Row(**row))

    def broadcasts(self) -> None:
        """Fan-out to 10 subscribers: calls/s delivered to all, idle pickup latency."""
        from .broadcast import measure_fanout  # its app, only when it runs
        progress("broadcasts: fan-out to 10 subscribers")
        for row in measure_fanout(self.url, capacity=self.report.capacity):
            self.report.add(Row(**row))

    def durability(self) -> None:
        """delay() and a -c 1 drain waiting for a replica, beside plain ones (its own
        primary and replica: the bench's Redis may have none)."""
        from .durable import measure_durability  # its app, only when it runs
        for row in measure_durability(capacity=self.report.capacity):
            self.report.add(Row(**row))

    def flow(self) -> None:
        """Limits configured but not reached, against none; Redis time per fetch."""
        from .flow import measure_flow  # its app, only when it runs
        for row in measure_flow(self.url, capacity=self.report.capacity):
            self.report.add(Row(**row))

    def fair(self) -> None:
        """A small group's task behind a big group's backlog; grouped drains against
        ungrouped ones."""
        from .fair import measure_fair  # its app, only when it runs
        for row in measure_fair(self.url, capacity=self.report.capacity):
            self.report.add(Row(**row))

    def dashboard(self) -> None:
        """The queue page and /metrics with --memory-tasks (1,000,000) queued over 100
        queues; the Redis calls and CPU of an idle dashboard with one open tab."""
        from .dashboard import measure_dashboard, measure_idle_dashboard  # its extra
        for row in measure_dashboard(self.url, tasks=self.session.memory_tasks):
            self.report.add(Row(**row))
        for row in measure_idle_dashboard(self.url):
            self.report.add(Row(**row))


def run_bench(url: Optional[str], *, start_server: bool, tasks: int, memory_tasks: int,
              scaling: bool, emit: Callable[[str], None], as_json: bool) -> bool:
    """Run the bench; returns True when every target was met. ``url`` is the one
    --broker gave (None: MINITASK_BROKER_URL's, unless ``start_server``).

    Raises:
        ConfigurationError: both a ``url`` and ``start_server`` (which Redis to
            measure?), none at all, or a URL the bench cannot measure (``check_url``).
        BrokerError: the Redis could not be reached.
    """
    if start_server and url:
        raise ConfigurationError("minitask bench: --broker and --start-server both name the "
                                 "Redis to measure; pass one of them")
    target = url or os.environ.get("MINITASK_BROKER_URL") or None
    if not start_server:
        if not target:
            raise ConfigurationError("minitask bench needs a Redis: set MINITASK_BROKER_URL, "
                                     "pass --broker, or use --start-server")
        check_url(target)
    server = ThrowawayServer() if start_server else None
    try:
        report = Bench(server.url if server else str(target), tasks=tasks,
                       memory_tasks=memory_tasks, scaling=scaling).run()
    finally:
        if server:
            server.stop()
    emit(report.as_json() if as_json else report.as_table())
    return all(row.met is not False for row in report.rows)
