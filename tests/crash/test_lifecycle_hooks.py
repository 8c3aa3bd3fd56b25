"""Lifecycle hooks with real worker processes on every pool: worker_process_init once
in each pool child (or thread, or on the asyncio loop) before its first task,
task_prerun and task_postrun around each attempt in the process that runs it, with
the task context current, worker_ready and worker_shutdown in the worker process;
a failing worker_process_init takes that child out of service, and a worker left
with no child (or thread) that can serve exits 1 saying why."""
from __future__ import annotations

import os
import re
import subprocess
import signal
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis

import tests.apps.lifecycle as lifecycle
from minitask import Minitask, Task
from tests.support.procfs import descendants
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Tuple[Minitask, Dict[str, "Task[Any, Any]"]]]:
    app = Minitask("lifecycle", broker=server.client())
    tasks = {name: app.task(name=task.name, retries=task.options.retries,
                            retry_backoff=task.options.retry_backoff,
                            retry_backoff_max=task.options.retry_backoff_max,
                            retry_on=task.options.retry_on)(task.func)
             for name, task in (("work", lifecycle.work), ("fail", lifecycle.fail))}
    yield app, tasks
    app.close()


def _worker(processes: Processes, server: RedisServer, log: Path, *args: str,
            **env: str) -> "subprocess.Popen[bytes]":
    return processes.worker("tests.apps.lifecycle", *args, log=log,
                            env={"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": "2",
                                 **env})


def _texts(client: "redis.Redis[bytes]", key: str) -> List[str]:
    return [raw.decode() for raw in client.lrange(key, 0, -1)]


#: pool -> (-c, how many worker_process_init calls, whether each is in its own process)
POOLS = {"process": (2, 2, True), "thread": (2, 2, False), "asyncio": (2, 1, False)}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_lifecycle_hooks_run_where_and_when_each_is_documented(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path,
        pool: str) -> None:
    app, tasks = producer
    client = server.client()
    concurrency, inits, own_process = POOLS[pool]
    worker = _worker(processes, server, tmp_path / "worker.log", "--pool", pool,
                     "-c", str(concurrency))
    works = [tasks["work"].delay(i) for i in range(8)]
    fails = [tasks["fail"].delay(i) for i in range(2)]
    assert [h.get(timeout=DEADLINE) for h in works] == list(range(8))
    wait_until(lambda: all(h.status() == "failed" for h in fails), timeout=DEADLINE,
               message="the failing tasks to be dead-lettered")
    every = works + fails
    wait_until(lambda: all(client.llen(f"hooks:postrun:{h.id}") == (1 if h in works else 2)
                           for h in every), timeout=DEADLINE, message="every task_postrun")
    children = descendants(worker.pid)

    os.kill(worker.pid, signal.SIGTERM)
    assert exit_code(worker) == 0

    init = [mark.split(":") for mark in _texts(client, "hooks:init")]
    assert len(init) == inits, init
    if own_process:  # one call in each child, none in the worker
        assert len({pid for pid, _ in init}) == inits
        assert all(int(pid) in children and int(pid) != worker.pid for pid, _ in init)
    else:  # in the worker, once per thread (or once, on the asyncio pool's loop)
        assert {int(pid) for pid, _ in init} == {worker.pid}
        assert len({thread for _, thread in init}) == inits
    init_pids = {int(pid) for pid, _ in init}
    assert _texts(client, "hooks:ready") == [f"{worker.pid}:{pool}"]
    assert _texts(client, "hooks:shutdown") == [f"{worker.pid}:{pool}"]
    for index, handle in enumerate(works):
        ran = [int(pid) for pid in _texts(client, f"runs:{handle.id}")]
        assert len(ran) == 1 and ran[0] in init_pids
        assert _texts(client, f"hooks:prerun:{handle.id}") == [f"{ran[0]}:1:True"]
        assert _texts(client, f"hooks:postrun:{handle.id}") == [
            f"{ran[0]}:1:True:succeeded:{index}"]
    for handle in fails:  # two attempts, each between its own prerun and postrun
        ran = [int(pid) for pid in _texts(client, f"runs:{handle.id}")]
        assert len(ran) == 2
        assert _texts(client, f"hooks:prerun:{handle.id}") == [
            f"{ran[0]}:1:True", f"{ran[1]}:2:True"]
        # each after its attempt's outcome is recorded: the first's "retrying" lets the
        # second be fetched at once, so the second's may be written first
        assert sorted(_texts(client, f"hooks:postrun:{handle.id}")) == sorted([
            f"{ran[0]}:1:True:retrying:ValueError", f"{ran[1]}:2:True:failed:ValueError"])


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_a_worker_whose_every_init_fails_exits_1_saying_why_and_loses_no_task(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path,
        pool: str) -> None:
    app, tasks = producer
    client = server.client()
    handle = tasks["work"].delay(1)
    concurrency, inits, _ = POOLS[pool]
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, "--pool", pool, "-c", str(concurrency),
                     LIFECYCLE_INIT_FAILS="all")

    assert exit_code(worker) == 1
    assert len(_texts(client, "hooks:init")) == inits  # each tried once, never again
    assert _texts(client, "hooks:ready") == []
    assert _texts(client, "hooks:shutdown") == [f"{worker.pid}:{pool}"]
    assert handle.status() == "queued"  # still ready, for a worker that can serve
    assert app.broker.queues.counts("default")["running"] == 0
    text = log.read_text()
    assert "RuntimeError: no database for this child" in text  # with its traceback
    assert re.search(r"minitask: error: (the \w+ pool cannot serve|no child is left to "
                     r"serve): the worker_process_init hook _on_init raised RuntimeError: "
                     r"no database for this child", text), text[-2000:]


def test_a_child_whose_init_failed_is_not_replaced_and_the_others_serve(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path) -> None:
    app, tasks = producer
    client = server.client()
    worker = _worker(processes, server, tmp_path / "worker.log", "--pool", "process",
                     "-c", "2", LIFECYCLE_INIT_FAILS="first")
    handles = [tasks["work"].delay(i) for i in range(20)]
    assert [h.get(timeout=DEADLINE) for h in handles] == list(range(20))
    served = {int(client.lindex(f"runs:{h.id}", 0)) for h in handles}
    assert len(served) == 1  # the child whose init succeeded ran them all
    assert len(_texts(client, "hooks:init")) == 2  # the failed one was not respawned
    wait_until(lambda: len(descendants(worker.pid)) == 1, timeout=DEADLINE,
               message="the child whose init failed to be reaped, and not replaced")
    assert worker.poll() is None  # it serves on with the child it has

    os.kill(worker.pid, signal.SIGTERM)
    assert exit_code(worker) == 0
    assert len(_texts(client, "hooks:init")) == 2


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_hooks_raising_system_exit_are_logged_and_every_task_runs_once(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path,
        pool: str) -> None:
    # Before: SystemExit from task_prerun ended the child (or thread, or asyncio job)
    # with the task leased: redelivered into the same end, then dead-lettered or
    # never answered; the task's function never ran.
    app, tasks = producer
    client = server.client()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, "--pool", pool, "-c", "2",
                     LIFECYCLE_HOOKS_EXIT="1")
    works = [tasks["work"].delay(i) for i in range(6)]
    assert [h.get(timeout=DEADLINE) for h in works] == list(range(6))
    assert {h.id: int(client.hget("runs", h.id) or 0) for h in works} == {
        h.id: 1 for h in works}
    wait_until(lambda: all(client.llen(f"hooks:postrun:{h.id}") == 1 for h in works),
               timeout=DEADLINE, message="every task_postrun")
    assert worker.poll() is None  # still serving
    worker.send_signal(signal.SIGTERM)
    assert exit_code(worker) == 0
    text = log.read_text()
    assert text.count("SystemExit") >= 12, text[-3000:]
    assert "died" not in text, text[-3000:]
