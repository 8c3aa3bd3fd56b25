"""``minitask bench``'s memory rows: Redis memory per queued task, and whether a
worker's resident memory stays flat while it drains a long queue."""
from __future__ import annotations

import time

from .report import Row, progress
from .session import Session
from .tasks import noop
from .workers import tree_rss_kib


def measure_memory(session: Session) -> None:
    """Queue ``session.memory_tasks`` tasks, then drain them with a ``-c 1`` worker."""
    n = session.memory_tasks
    progress(f"memory: {n:,} tasks queued")
    client, report = session.client, session.report
    bench_app = session.app()
    task = bench_app.tasks[noop.name]
    before = int(client.info("memory")["used_memory"])
    batch = [(index,) for index in range(1000)]
    for _ in range(n // 1000):
        task.delay_many(batch)
    used = int(client.info("memory")["used_memory"]) - before
    keys = bench_app.broker.queues.keys("default")
    first = client.lindex(keys.ready[9 - noop.priority], 0)
    sample = client.hget(keys.messages, first) if isinstance(first, bytes) else None
    body = len(sample) if isinstance(sample, bytes) else 0
    per_task = used / n - body
    report.add(Row("Redis memory per queued task, above message", per_task, "bytes",
                   "<= 200 bytes", per_task <= 200,
                   f"{used / n:,.0f} bytes in all, message {body} bytes"))
    process = session.workers.start("--pool", "process", "-c", "1")
    session.workers.wait_registered(client, 1)
    rss = []
    for _ in range(6):
        time.sleep(0.5)
        rss.append(tree_rss_kib(process.pid))
    session.cleanup()
    growth = rss[-1] - rss[1]
    report.add(Row("worker RSS growth while draining a 1M queue", growth / 1024.0, "MiB",
                   "flat (< 5 MiB)", growth < 5 * 1024,
                   f"RSS {rss[1] / 1024:.1f} -> {rss[-1] / 1024:.1f} MiB (supervisor "
                   f"+ child)"))
