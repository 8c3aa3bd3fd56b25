"""``minitask bench``'s dashboard rows: with 1,000,000 tasks queued over 100
queues, how long the queue page and ``/metrics`` take to answer; and what an
idle dashboard with one open live tab costs Redis each minute.

Runs under a throwaway app name of its own, serves its dashboard on a free
loopback port in this process, asks over real HTTP, and deletes its keys
when done (each key by name: no SCAN).
"""
from __future__ import annotations

import re
import threading
import time
import urllib.request
from typing import Any, Dict, List

from ..app import Minitask
from ..broker.keys import AppKeys, queue_keys
from ..printable import own_logger
from ..stores.metrics import DURATION, PICKUP, TASKS as COUNTED, Delta
from .scratch import BENCH, purge

logger = own_logger(__name__)

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


#: The app of the idle dashboard row: two queues, nothing queued, no worker.
IDLE_APP = f"{BENCH}-dashboard-idle"
#: What the open tab polls: the running tab's JSON twin, as live.js asks it.
IDLE_PATH = "/api/running"
#: Redis commands the bench itself sends while it measures.
OURS = ("info",)


def _poll_ms(script: str) -> int:
    """How often an open tab polls, as its script (live.js) says (``POLL_MS``)."""
    found = re.search(r"POLL_MS = (\d+)", script)
    if found is None:
        raise ValueError("live.js sets no POLL_MS")
    return int(found.group(1))


def _calls(client: Any) -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[len("cmdstat_"):]: int(value["calls"]) for name, value in stats.items()}


def measure_idle_dashboard(url: str, seconds: float = 20.0) -> List[Dict[str, Any]]:
    """What an idle dashboard with one open live tab (two queues, nothing queued, no
    worker) costs Redis: calls and CPU per minute, from ``INFO commandstats`` and
    ``INFO cpu`` around ``seconds`` of the tab's polls (the bench's own INFO calls
    left out of the count; their CPU, a few microseconds, is in), less Redis's own
    CPU over ``seconds`` without the tab."""
    from ..dashboard.server import make  # the dashboard extra, only when measured
    from .capacity import redis_cpu_seconds
    bench_app = Minitask(IDLE_APP, broker=url, default_queue="q000")  # 2 queues, no more
    for queue in ("q000", "q001"):
        bench_app.task(name=f"idle.{queue}", queue=queue)(noop)
    bench_app.broker.queues.register_queues(["q000", "q001"])
    server = make(bench_app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    dashboard: Any = server.get_app()
    period = _poll_ms(dashboard.live_js) / 1000.0
    polls = 0
    try:
        tab = f"http://127.0.0.1:{server.server_port}{IDLE_PATH}"
        _timed_get(tab)  # warm, as a tab that has loaded its page
        client = bench_app.broker.client
        # Redis's own CPU over as long without the tab (its timers): taken off
        idle = redis_cpu_seconds(client)
        time.sleep(seconds)
        idle = redis_cpu_seconds(client) - idle
        before, cpu = _calls(client), redis_cpu_seconds(client)
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            _timed_get(tab)
            polls += 1
            time.sleep(max(0.0, started + polls * period - time.monotonic()))
        elapsed = time.monotonic() - started
        after, cpu = _calls(client), redis_cpu_seconds(client) - cpu - idle * (
            elapsed / seconds)
    finally:
        server.shutdown()
        server.server_close()
        purge(bench_app.broker.client, IDLE_APP)
        bench_app.close()
    made = {name: count - before.get(name, 0) for name, count in after.items()
            if name not in OURS and count > before.get(name, 0)}
    calls = sum(made.values())
    each = ", ".join(f"{name} {count / polls:g}" for name, count in sorted(made.items()))
    detail = (f"one tab polling {IDLE_PATH} every {period * 1000:.0f} ms, 2 queues, for "
              f"{elapsed:.0f} s: {calls / polls:.1f} Redis commands per poll ({each}; "
              f"INFO commandstats counts those a script calls too); nothing polls while "
              f"the tab is hidden")
    return [
        {"metric": "idle dashboard, one open tab: Redis commands/min",
         "value": calls * 60.0 / elapsed, "unit": "commands/min", "target": "-", "met": None,
         "detail": detail},
        {"metric": "idle dashboard, one open tab: Redis CPU/min",
         "value": cpu * 1000.0 * 60.0 / elapsed, "unit": "ms/min", "target": "-",
         "met": None, "detail": f"{cpu * 1e6 / polls:.0f} us of Redis CPU per poll "
                                f"(INFO cpu, less Redis's own over as long without "
                                f"the tab: {idle * 1000 * 60 / seconds:.0f} ms/min)"},
    ]
