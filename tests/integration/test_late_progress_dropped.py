"""``set_progress`` from a thread a task left running, once the task's outcome is
recorded, changes nothing (issue 29, probe31 L4: a succeeded task's progress read
99/100 "after return"): its attempt has ended, so the report is dropped, said once
per attempt at WARNING, and the progress stays as the attempt left it. Real worker
processes of tests/apps/late_progress.py on the suite's redis-server, thread and
process pools."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0
SAID = "set_progress after its attempt ended is ignored"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_progress_reported_after_the_outcome_is_dropped(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        pool: str) -> None:
    import tests.apps.late_progress as late
    app = Minitask("late_progress", broker=redis_server.url)
    app.task(name="reports_late", retries=0)(late.reports_late.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.late_progress", "--pool", pool,
                              env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        handle = app.tasks["reports_late"].delay()
        assert handle.get(timeout=DEADLINE) == "done"
        assert admin.blpop(f"late:{handle.id}", timeout=DEADLINE) is not None
        end = time.monotonic() + DEADLINE  # the warning, or (before) the late value
        while SAID not in log.read_text(errors="replace") and time.monotonic() < end:
            progress = handle.progress()
            if progress is not None and progress.current != 1:
                break
            time.sleep(0.05)
        progress = handle.progress()
        assert progress is not None
        assert (progress.current, progress.total, progress.message) == (1, 100, "start")
        assert handle.status() == "succeeded"
    finally:
        app.close()
        stop_worker(worker, log)
    said = [line for line in log.read_text(errors="replace").splitlines() if SAID in line]
    assert len(said) == 1 and "WARNING" in said[0] and handle.id in said[0], said
