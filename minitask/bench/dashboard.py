"""``minitask bench``'s dashboard rows: with 1,000,000 tasks queued over 100
queues, how long the queue page and ``/metrics`` take to answer.

Runs under a throwaway app name of its own, serves its dashboard on a free
loopback port in this process, asks over real HTTP, and deletes its keys
when done (each key by name: no SCAN).
"""
from __future__ import annotations

import logging
import threading
import time
import urllib.request
from typing import Any, Dict, List

from ..app import Minitask
from ..broker.keys import AppKeys, queue_keys
from ..stores.metrics import DURATION, PICKUP, TASKS as COUNTED, Delta
from .scratch import BENCH

logger = logging.getLogger(__name__)

APP = f"{BENCH}-dashboard"
QUEUES = 100
TASKS = 1_000_000
#: Requests per page; the median is reported.
ROUNDS = 7
TARGET_MS = 200.0


def noop(index: int) -> None:
    """Never run: the bench only queues it."""


def _queue(index: int) -> str:
    return f"q{index:03d}"


def _seed(bench_app: Minitask, tasks: int, queues: int) -> None:
    per_queue = tasks // queues
    delta = Delta()  # what workers would have added: every queue and task has counters
    for index in range(queues):
        queue = _queue(index)
        task = bench_app.task(name=f"noop.{queue}", queue=queue)(noop)
        sent = 0
        while sent < per_queue:
            chunk = min(10_000, per_queue - sent)
            task.delay_many([(sent + i,) for i in range(chunk)])
            sent += chunk
        delta.counts[COUNTED, queue, task.name, "succeeded"] = 1
        delta.counts[DURATION, task.name, "0.005"] = 1
        delta.counts[PICKUP, queue, "0.005"] = 1
    bench_app.broker.metrics.add(delta)


def _cleanup(bench_app: Minitask, queues: int) -> None:
    client = bench_app.broker.client
    for index in range(queues):
        k = queue_keys(APP, _queue(index))
        client.delete(*k.ready, k.delayed, k.order, k.sequence, k.leases, k.messages,
                      k.deliveries, k.retrying, k.dead, k.dead_info, k.cancelled, k.wake)
    keys = AppKeys(APP)
    client.delete(keys.queues, keys.metrics, keys.workers)


def _timed_get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        reply.read()
    return time.perf_counter() - started


def measure_dashboard(url: str, tasks: int = TASKS, queues: int = QUEUES) -> List[Dict[str, Any]]:
    """The dashboard rows, as ``bench.Row`` keyword arguments."""
    from ..dashboard.server import make  # the dashboard extra, only when measured
    bench_app = Minitask(APP, broker=url)
    logger.info("dashboard: %s tasks queued over %d queues", f"{tasks:,}", queues)
    _cleanup(bench_app, queues)
    server = make(bench_app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        started = time.perf_counter()
        _seed(bench_app, tasks, queues)
        seeded = time.perf_counter() - started
        thread.start()
        base = f"http://127.0.0.1:{server.server_port}"
        figures = {}
        for path in ("/", "/metrics"):
            _timed_get(base + path)  # warm: templates compiled, connections open
            times = sorted(_timed_get(base + path) for _ in range(ROUNDS))
            figures[path] = times[len(times) // 2] * 1000
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()
        _cleanup(bench_app, queues)
        bench_app.close()
    detail = f"{tasks:,} tasks over {queues} queues (seeded in {seeded:,.0f} s); median of {ROUNDS}"
    return [
        {"metric": "dashboard queue page", "value": figures["/"], "unit": "ms",
         "target": f"< {TARGET_MS:.0f} ms", "met": figures["/"] < TARGET_MS, "detail": detail},
        {"metric": "dashboard /metrics", "value": figures["/metrics"], "unit": "ms",
         "target": f"< {TARGET_MS:.0f} ms", "met": figures["/metrics"] < TARGET_MS,
         "detail": detail},
    ]
