"""``set_progress`` with a number below 0 (``set_progress(-5, -1)``, accepted and shown
"-5 / -1": issue 29, probe29p LOW) is ignored as a number that is not finite is: one
WARNING per attempt, and the task, its outcome and its later progress go on (a bad
progress value never changes the task's outcome). A total below current is kept (a
total may be an estimate). Real worker processes of tests/apps/negative_progress.py
on the suite's redis-server, on the thread and process pools."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_progress_below_zero_is_ignored_with_one_warning_and_the_task_goes_on(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        pool: str) -> None:
    import tests.apps.negative_progress as negative
    app = Minitask("negative_progress", broker=redis_server.url)
    app.task(name="reports")(negative.reports.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.negative_progress", "--pool", pool,
                              env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        both = app.tasks["reports"].delay(-5, -1)
        total = app.tasks["reports"].delay(3, -1)
        current = app.tasks["reports"].delay(-0.5, 10)
        handles = (both, total, current)
        assert [handle.get(timeout=DEADLINE) for handle in handles] == ["fine"] * 3
        for handle in handles:
            progress = handle.progress()
            assert progress is not None
            assert (progress.current, progress.total, progress.message) == \
                (5, 4, "past an estimate")
    finally:
        app.close()
        stop_worker(worker, log)
    text = log.read_text(errors="replace")
    for handle, shown in ((both, "(-5, -1)"), (total, "(3, -1)"), (current, "(-0.5, 10)")):
        said = [line for line in text.splitlines()
                if handle.id in line and "set_progress" in line]
        assert len(said) == 1, said  # once per attempt
        assert f"set_progress{shown} ignored: progress numbers must be finite and 0 or more" \
            in said[0] and "WARNING" in said[0], said[0]
    assert "ERROR" not in text, text[-3000:]
