"""A copy of the worker that a task forked leaves as it returns from the task's code
even when it read its own pid first, as any Redis call it made would: the fork mark
(``broker.connections``) is set again in the copy, so the inline check after the
task's code (``worker/forks.py``, issue 36) passes over it on the mark alone and
must catch it by the pid it compares. Every pool; the parent's attempt is recorded
once, the copy exits 0 and records nothing. Every wait has a deadline; the worker's
process group is killed at the end, whatever happened."""
from __future__ import annotations

from pathlib import Path

import pytest

from minitask import Minitask
from tests.support.pool_workers import kill_group, pool_worker, producer_fixture, stops_cleanly
from tests.support.processes import Processes
from tests.support.procfs import pid_running
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 20.0
STOPS_WITHIN = 15.0


producer = producer_fixture("tests.apps.forking")


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
@pytest.mark.parametrize("task", ["forks", "aforks"])
def test_a_copy_that_read_its_pid_still_leaves(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str, task: str,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = pool_worker(processes, "tests.apps.forking", server, pool, 1, log, "--grace", "60")
    try:
        done = tmp_path / "child"
        handle = producer.tasks[task].delay(str(done), "reads_pid")
        assert handle.get(timeout=DEADLINE) == ["parent", 0]
        child = int(done.read_text())
        assert not pid_running(child), f"its child {child} is still running"
        assert producer.tasks["ok"].delay(7).get(timeout=DEADLINE) == 7  # the next one runs
        stops_cleanly(worker, log, STOPS_WITHIN, DEADLINE)
    finally:
        kill_group(worker.pid)
    logged = log.read_text()
    assert logged.count(" succeeded in ") == 2, logged  # each task once: the parent's
    assert "SystemExit" not in logged and "lease had expired" not in logged, logged
