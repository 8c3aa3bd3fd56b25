"""Recycling process pool children under load, with real worker processes: a child
ends after its share of tasks (or past a memory limit) between two tasks and is
replaced; every task runs exactly once, no child is reported dead, and ``minitask
status`` and the dashboard count the recycled children."""
from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import redis

import tests.apps.lifecycle as lifecycle
from minitask import Minitask, Task
from minitask.cli import main
from minitask.dashboard.views import workers as dashboard_workers
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 120.0


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("lifecycle", broker=server.client())
    yield app
    app.close()


def _leak(app: Minitask) -> "Task[Any, Any]":
    return app.task(name=lifecycle.leak.name)(lifecycle.leak.func)


def _worker(processes: Processes, server: RedisServer, log: Path,
            *args: str) -> "subprocess.Popen[bytes]":
    return processes.worker("tests.apps.lifecycle", "--pool", "process", *args, log=log,
                            env={"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": "2"})


def _runs(client: "redis.Redis[bytes]", ids: List[str]) -> Dict[str, List[int]]:
    """Task id -> the pids that ran it, in order."""
    pipe = client.pipeline(transaction=False)
    for task_id in ids:
        pipe.lrange(f"runs:{task_id}", 0, -1)
    return {task_id: [int(pid) for pid in pids] for task_id, pids in zip(ids, pipe.execute())}


def _status_recycled(capsys: pytest.CaptureFixture[str]) -> int:
    try:
        assert main(["status", "-A", "tests.apps.lifecycle", "--json"]) == 0
    finally:  # the command loads the module's app: it must not keep this test's server
        lifecycle.app.close()
    found = json.loads(capsys.readouterr().out)["workers"]
    assert len(found) == 1, found
    return int(found[0]["recycled"])


def _assert_nothing_left(app: Minitask) -> None:
    counts = app.broker.queues.counts("default")
    assert (counts["ready"], counts["running"], counts["scheduled"], counts["dead"]) == (
        0, 0, 0, 0), counts


@pytest.mark.parametrize("count,prefetch", [(1000, 1), (300, 4)])
def test_max_tasks_per_child_recycles_children_under_load_and_runs_each_task_once(
        processes: Processes, server: RedisServer, producer: Minitask, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, count: int,
        prefetch: int) -> None:
    """With --prefetch above 1, a recycled child also gives back what it leased and
    had not started: none of it is lost, none runs twice."""
    monkeypatch.setenv("MINITASK_BROKER_URL", server.url)
    client = server.client()
    handles = _leak(producer).delay_many([(i, 0.1) for i in range(count)])
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, "-c", "2", "--max-tasks-per-child", "7",
                     "--prefetch", str(prefetch))

    wait_until(lambda: client.hlen("runs") == count, timeout=DEADLINE, interval=0.2,
               message="every task to run")
    wait_until(lambda: all(h.status() == "succeeded" for h in handles[-20:]),
               timeout=DEADLINE, message="the last outcomes to be recorded")
    runs = _runs(client, [h.id for h in handles])
    assert all(len(pids) == 1 for pids in runs.values()), "a task ran twice or never"
    assert {int(n) for n in client.hvals("runs")} == {1}
    per_child = Counter(pids[0] for pids in runs.values())
    assert max(per_child.values()) <= 7
    assert len(per_child) >= math.ceil(count / 7)
    full = sum(1 for n in per_child.values() if n == 7)  # each of these was recycled
    assert full >= len(per_child) - 2  # all but the two children still serving
    wait_until(lambda: _status_recycled(capsys) >= full, timeout=DEADLINE,
               message=f"minitask status to count {full} recycled children")
    try:
        assert main(["status", "-A", "tests.apps.lifecycle"]) == 0
    finally:
        lifecycle.app.close()
    counted = re.search(r"  recycled (\d+)  ", capsys.readouterr().out)
    assert counted is not None and int(counted.group(1)) >= full
    shown = dashboard_workers(producer)["workers"]
    assert len(shown) == 1 and shown[0]["recycled"] >= full
    _assert_nothing_left(producer)
    assert all(h.status() == "succeeded" for h in handles)

    os.kill(worker.pid, signal.SIGTERM)
    assert exit_code(worker) == 0
    text = log.read_text()
    assert "died" not in text and "exited with code" not in text  # no crash reported


def test_max_memory_per_child_bounds_a_leaking_childs_memory(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    client = server.client()
    limit_mb, leak_mb, count = 150, 8, 60
    handles = _leak(producer).delay_many([(i, leak_mb) for i in range(count)])
    worker = _worker(processes, server, tmp_path / "worker.log", "-c", "1",
                     "--max-memory-per-child", str(limit_mb))

    wait_until(lambda: all(h.status() == "succeeded" for h in handles[-5:]),
               timeout=DEADLINE, message="every task to run")
    runs = _runs(client, [h.id for h in handles])
    assert all(len(pids) == 1 for pids in runs.values()), "a task ran twice or never"
    sizes: Dict[int, List[float]] = {}
    for member, size in client.zrange("rss", 0, -1, withscores=True):
        sizes.setdefault(int(member.decode().split(":")[1]), []).append(size)
    assert sum(len(found) for found in sizes.values()) == count
    assert len(sizes) >= 2, "the leaking child was never replaced"
    # a child is replaced after the task that took it past the limit: never much more
    assert max(max(found) for found in sizes.values()) <= limit_mb + leak_mb + 4, sizes
    last = runs[handles[-1].id][0]
    for pid, found in sizes.items():
        if pid != last:  # every child replaced was replaced for its memory
            assert max(found) > limit_mb, (pid, found)
    _assert_nothing_left(producer)

    os.kill(worker.pid, signal.SIGTERM)
    assert exit_code(worker) == 0
