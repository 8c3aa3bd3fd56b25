"""A lifecycle hook that forks, on every pool: its copy of the worker ends as it
comes back to the pool's code, before the task's code (``task_start``, ``task_prerun``)
and before anything more is fetched or recorded (``task_success``, ``task_postrun`` on
the loop; ``task_failure`` in a recording thread). The task's code runs once, in the
worker, and its outcome is recorded; the next task runs; SIGTERM stops the worker.

Before, the copy went on as a worker: after a ``task_postrun`` or ``task_success`` hook
it ran an idle event loop for ever, its parent waiting for it on the loop's thread (no
later task ran, SIGTERM could not stop the worker within its grace); after a
``task_prerun`` hook it went on into the attempt (an ``async def`` task's code ran in
the copy only, its status "running" for ever); after a ``task_failure`` hook it waited
for a step in a recording thread for ever. Every wait here has a deadline; the worker's
process group is killed at the end, whatever happened.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from minitask import Minitask, TaskFailed
from tests.support.pool_workers import kill_group, producer_fixture, stops_cleanly
from tests.support.processes import Processes
from tests.support.procfs import group_members, pid_running
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

APP = "tests.apps.hook_forking"
#: Longest a task's result may take (each returns in milliseconds once fixed).
DEADLINE = 20.0
#: How long the stop may take with nothing running: far below the grace.
STOPS_WITHIN = 15.0
GRACE = 60
#: A task each run: its own hook forks (``a``: an ``async def`` task).
TASKS = ["start_forks", "astart_forks", "prerun_forks", "aprerun_forks", "success_forks",
         "asuccess_forks", "postrun_forks", "apostrun_forks", "failure_forks"]


producer = producer_fixture(APP)


@pytest.mark.parametrize("pool", ["asyncio", "thread", "process"])
@pytest.mark.parametrize("name", TASKS)
def test_a_copy_a_hook_forked_ends_before_the_task_runs_or_more_is_recorded(
        processes: Processes, server: RedisServer, producer: Minitask, name: str, pool: str,
        tmp_path: Path) -> None:
    """On the thread and process pools a ``task_start`` or ``task_prerun`` hook's copy
    went on into the task's code (it ran twice, once in the copy) before it left."""
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", pool, "-c", "1", "--grace", str(GRACE),
                              env={"MINITASK_BROKER_URL": server.url,
                                   "HOOK_FORK_DIR": str(tmp_path)}, log=log)
    try:
        handle = producer.tasks[name].delay()
        if name == "failure_forks":
            with pytest.raises(TaskFailed):
                handle.get(timeout=DEADLINE)
            assert handle.status() == "failed"
        else:  # the task's code ran in the worker itself (a pool child), not in a copy
            ran_in = handle.get(timeout=DEADLINE)
            if pool == "process":  # a child of the worker's, still serving
                assert ran_in in group_members(worker.pid), ran_in
            else:
                assert ran_in == worker.pid
            assert handle.status() == "succeeded"
        marker = tmp_path / handle.id
        # (its content, not only the file: the child opens it, then writes)
        wait_until(lambda: marker.exists() and marker.read_text().strip(), timeout=DEADLINE,
                   message="the hook's child")
        child = int(marker.read_text())
        wait_until(lambda: not pid_running(child), timeout=DEADLINE,
                   message=f"the hook's child {child} to end")
        ran = (tmp_path / "runs").read_text().splitlines()
        assert len(ran) == 1 and ran[0].startswith(f"{handle.id} "), ran  # once
        assert int(ran[0].split()[1]) != child, ran  # in the worker, not the copy
        assert producer.tasks["ok"].delay(7).get(timeout=DEADLINE) == 7  # the next one runs

        stops_cleanly(worker, log, STOPS_WITHIN, DEADLINE)
    finally:
        kill_group(worker.pid)
    logged = log.read_text()
    assert logged.count(" succeeded in ") == (1 if name == "failure_forks" else 2), logged
    assert "lease had expired" not in logged and "did not stop" not in logged, logged
