"""A task may fork: the forked copy of the worker ends as it leaves the task's code, as
``os._exit`` would (exit code 0 for a return or ``sys.exit(0)``, ``sys.exit``'s own
int, else 1), recording nothing; the parent's attempt is the task's, recorded once.

Before (issue 29), minitask's code in the copy went on after the task's code: it took
the child's ``sys.exit(0)`` for the attempt's failure (dead-lettered "SystemExit: 0",
or "running" for ever on the asyncio pool) and never exited, so the parent waited in
``waitpid`` for ever: the slot was lost, SIGTERM could not stop the worker and the copy
outlived it (spinning, on the process pool); a child that returned recorded a second
outcome (on the process pool, its value was the result) and a false "lease had
expired" warning. Every wait here has a deadline; the worker's process group is
killed at the end, whatever happened.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import pytest

from minitask import Minitask
from tests.support.pool_workers import kill_group, pool_worker, producer_fixture, stops_cleanly
from tests.support.processes import Processes
from tests.support.procfs import pid_running
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: Longest a task's result may take (each returns in milliseconds once fixed).
DEADLINE = 20.0
APP = "tests.apps.forking"
#: How long the stop may take with nothing running: far below the grace.
STOPS_WITHIN = 15.0
GRACE = 60

#: (task, how its child leaves the task's code, the child's exit code)
CASES: List[Tuple[str, str, int]] = [
    ("forks", "exit0", 0), ("forks", "exit3", 3), ("forks", "raises", 1),
    ("forks", "returns", 0), ("aforks", "exit0", 0), ("aforks", "returns", 0)]


producer = producer_fixture(APP)


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_task_that_forks_is_recorded_once_and_its_copy_exits(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = pool_worker(processes, APP, server, pool, 2, log, "--grace", str(GRACE))
    try:
        for index, (task, how, code) in enumerate(CASES):
            done = tmp_path / f"child-{index}"
            handle = producer.tasks[task].delay(str(done), how)
            case = f"{task} {how} on the {pool} pool"
            assert handle.get(timeout=DEADLINE) == ["parent", code], case
            assert done.exists(), f"{case}: the child's work was not done"
            child = int(done.read_text())
            assert not pid_running(child), f"{case}: its child {child} is still running"
            assert handle.status() == "succeeded", case
        assert producer.tasks["ok"].delay(7).get(timeout=DEADLINE) == 7  # the next one runs

        # nothing of the worker is left: no copy a task forked, no pool child
        stops_cleanly(worker, log, STOPS_WITHIN, DEADLINE)
    finally:
        kill_group(worker.pid)

    logged = log.read_text()
    succeeded = [line for line in logged.splitlines() if " succeeded in " in line]
    assert len(succeeded) == len(CASES) + 1, logged  # each task once: the parent's
    assert "SystemExit" not in logged and "dead" not in logged, logged
    assert "lease had expired" not in logged, logged
    assert "raised in the forked child" in logged  # the child's error, on its stderr


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_copy_a_hook_forked_ends_as_it_comes_back_to_the_pool(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        tmp_path: Path) -> None:
    """A ``task_postrun`` hook's child returns into the worker's code: it ends before
    the pool's next fetch (the thread's, the child's loop, the asyncio pool's slot),
    rather than serve on as a worker its parent waits for (unsupervised, on the process
    pool, hearing its stop bell ring for ever; on the asyncio pool, an idle event loop
    its parent waited for on the loop's thread: no later task ran). The asyncio pool's
    other hooks: test_a_hook_that_forks_on_every_pool.py."""
    log = tmp_path / "worker.log"
    worker = pool_worker(processes, APP, server, pool, 1, log, "--grace", str(GRACE))
    try:
        done = tmp_path / "hook-child"
        assert producer.tasks["hook_forks"].delay(str(done)).get(timeout=DEADLINE) == str(done)
        # (its content, not only the file: the child opens it, then writes)
        wait_until(lambda: done.exists() and done.read_text().strip(), timeout=DEADLINE,
                   message="the hook's child's work")
        child = int(done.read_text())
        wait_until(lambda: not pid_running(child), timeout=DEADLINE,
                   message=f"the hook's child {child} to end")
        assert producer.tasks["ok"].delay(7).get(timeout=DEADLINE) == 7  # the next one runs

        stops_cleanly(worker, log, STOPS_WITHIN, DEADLINE)
    finally:
        kill_group(worker.pid)
    assert log.read_text().count(" succeeded in ") == 2, log.read_text()
