"""Metrics and progress from real worker processes (``python -m minitask worker``)
on the suite's own redis-server: /metrics sums what two workers did; a process
pool task's progress is visible while it runs, coalesced to about ten writes a
second, and its last value is the one read afterwards."""
from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

import tests.apps.observe as observe
from minitask import Minitask, Task, current_task
from minitask.admin import live_workers
from tests.support.dashboards import serving
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

APP_MODULE = "tests.apps.observe"
DEADLINE = 90.0


def client_app(url: str) -> Tuple[Minitask, Dict[str, "Task[Any, Any]"]]:
    """A producer of tests.apps.observe's tasks, under the names its workers know."""
    app = Minitask("observe", broker=url)
    tasks = {}
    for task in (observe.ok, observe.bad, observe.count_up):
        found = task.options
        tasks[task.func.__name__] = app.task(
            name=task.name, retries=found.retries, retry_backoff=found.retry_backoff,
            retry_backoff_max=found.retry_backoff_max, retry_on=found.retry_on)(task.func)
    return app, tasks


@pytest.fixture
def served(redis_server: RedisServer, admin: "redis.Redis[bytes]"
           ) -> Iterator[Tuple[Minitask, Dict[str, "Task[Any, Any]"], str]]:
    """The producer app and its dashboard, served on a free port in this process."""
    app, tasks = client_app(redis_server.url)
    try:
        with serving(app) as server:
            yield app, tasks, f"http://127.0.0.1:{server.server_port}"
    finally:
        app.close()


@pytest.fixture
def logs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[List[Path]]:
    found: List[Path] = []
    yield found
    if did_fail(request):
        for path in found:
            print(f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}")


def start_worker(processes: Processes, url: str, log: Path, *args: str
                 ) -> "subprocess.Popen[bytes]":
    return processes.worker(APP_MODULE, *args, env={"MINITASK_BROKER_URL": url}, log=log)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return str(reply.read().decode())


def samples(url: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(get(url + "/metrics")):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def outcome_counts(url: str, task: str) -> List[float]:
    found = samples(url)
    return [found.get(("minitask_tasks_total", (("outcome", outcome), ("queue", "default"),
                                                ("task", task))), 0.0)
            for outcome in ("succeeded", "failed", "retried", "dead")]


def test_metrics_sum_what_two_worker_processes_did(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        served: Tuple[Minitask, Dict[str, "Task[Any, Any]"], str], tmp_path: Path,
        logs: List[Path]) -> None:
    app, tasks, base = served
    workers = []
    for index in range(2):
        logs.append(tmp_path / f"worker-{index}.log")
        workers.append(start_worker(processes, redis_server.url, logs[-1], "--pool", "process",
                                    "--concurrency", "2"))
    wait_until(lambda: len(live_workers(app)) == 2, timeout=DEADLINE, message="two workers")
    assert samples(base)["minitask_workers", ()] == 2
    oks = tasks["ok"].delay_many([(i,) for i in range(40)])
    tasks["bad"].delay_many([(i,) for i in range(4)])
    wait_until(lambda: all(h.status() == "succeeded" for h in oks)
               and app.broker.queues.counts("default")["dead"] == 4,
               timeout=DEADLINE, message="every task to end")
    # the workers add their counts with their heartbeats (every second here)
    wait_until(lambda: outcome_counts(base, observe.ok.name) == [40, 0, 0, 0]
               and outcome_counts(base, observe.bad.name) == [0, 8, 4, 4],
               timeout=DEADLINE, message="the counts in /metrics")
    # both workers ran tasks, each in two children: counts from four processes
    assert {int(pid) for pid in admin.lrange("marks:workers", 0, -1)} == {
        worker.pid for worker in workers}
    found = samples(base)
    assert found["minitask_task_duration_seconds_count", (("task", observe.ok.name),)] == 40
    assert found["minitask_task_duration_seconds_count", (("task", observe.bad.name),)] == 8
    assert found["minitask_pickup_latency_seconds_count", (("queue", "default"),)] == 48
    assert found["minitask_queue_tasks", (("queue", "default"), ("state", "dead"))] == 4
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=DEADLINE) == 0
    after = samples(base)
    assert after["minitask_workers", ()] == 0
    assert outcome_counts(base, observe.ok.name) == [40, 0, 0, 0]  # nothing counted twice
    minutes = app.broker.metrics.throughput(app.clock.now_ms(), 60)
    assert sum(counts.get("default", 0) for _, counts in minutes) == 48


def test_progress_of_a_process_pool_task_while_it_runs_and_after(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        served: Tuple[Minitask, Dict[str, "Task[Any, Any]"], str], tmp_path: Path,
        logs: List[Path]) -> None:
    app, tasks, base = served
    logs.append(tmp_path / "worker.log")
    start_worker(processes, redis_server.url, logs[-1], "--pool", "process")
    wait_until(lambda: len(live_workers(app)) == 1, timeout=DEADLINE, message="the worker")
    calls = 1_000_000
    admin.config_resetstat()
    handle = tasks["count_up"].delay(calls, "release")
    first = wait_until(handle.progress, timeout=DEADLINE, message="progress while it runs")
    assert first.total == calls and first.message == "counting"
    loop_seconds = float(wait_until(lambda: admin.lindex("marks:loop_seconds", 0),
                                    timeout=DEADLINE, message="the loop to end"))
    # the task now waits without calling again: its last value still reaches Redis
    wait_until(lambda: handle.progress().current == calls, timeout=DEADLINE,
               message="the last value while the task still runs")
    assert handle.status() == "running"
    page = get(f"{base}/task/{handle.id}")
    assert f"{calls} / {calls}" in page and "counting" in page
    writes = admin.info("commandstats")["cmdstat_set"]["calls"]
    print(f"{calls:,} set_progress calls in {loop_seconds:.2f} s: {writes} writes")
    # at most one write per 0.1 s of the loop, plus the first and the last
    assert 1 <= writes <= 10 * loop_seconds + 3, (writes, loop_seconds)
    # the last value was written a while before the end: it must still expire with the
    # result, not result_ttl after it was written
    time.sleep(1.5)
    admin.rpush("release", 1)
    assert handle.get(timeout=DEADLINE) == calls
    final = handle.progress()
    assert final is not None and final.current == calls
    # both read at one instant (a transaction): read one after the other, a later
    # read of the same deadline is a millisecond shorter
    reads = admin.pipeline(transaction=True)
    reads.pttl(app.broker.progress.key("default", handle.id))
    reads.pttl(app.broker.results.keys("default").result(handle.id))
    progress_ttl, result_ttl = reads.execute()
    assert 0 < progress_ttl <= 86_400_000
    # the same deadline, give or take the milliseconds between the two writes
    assert abs(result_ttl - progress_ttl) < 1_000, (result_ttl, progress_ttl)


def test_progress_hooks_and_metrics_in_the_thread_and_asyncio_pools(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = Minitask("observe-pools", broker=redis_server.url)
    heard: List[Tuple[str, str]] = []
    app.on("task_start", lambda context: heard.append(("start", context.name)))
    app.on("task_success", lambda context, value: heard.append(("success", context.name)))

    @app.task
    async def in_loop(n: int) -> int:
        context = current_task()
        assert context is not None
        for i in range(1, n + 1):
            context.set_progress(i, n)
            if i % 1000 == 0:
                await asyncio.sleep(0)
        return n

    @app.task
    def in_thread(n: int) -> int:
        context = current_task()
        assert context is not None
        for i in range(1, n + 1):
            context.set_progress(i, n)
        return n

    try:
        for pool, task in (("asyncio", in_loop), ("thread", in_thread)):
            handle = task.delay(50_000)
            worker = app.worker(pool=pool, concurrency=2, burst=True)
            worker.run()  # its last metrics are added as it stops
            assert handle.get(timeout=DEADLINE) == 50_000
            progress = handle.progress()
            assert progress is not None
            assert (progress.current, progress.total) == (50_000, 50_000)
            assert ("start", task.name) in heard and ("success", task.name) in heard
            assert app.broker.metrics.totals()[("tasks", "default", task.name,
                                                "succeeded")] == 1
    finally:
        app.close()
