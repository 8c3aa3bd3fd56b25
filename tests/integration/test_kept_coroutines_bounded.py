"""Coroutines an attempt's loop abandoned are kept for good (collecting one that takes
every exception could spin for ever), so a process keeps at most ``KEPT_MOST`` of
them: a process pool child past it is replaced between tasks (review29e F4: they
piled up without bound for a recurring overrunning task).

A real process pool worker of tests/apps/kept_many.py (KEPT_MOST lowered to 2) on the
suite's redis-server, stopped with SIGTERM.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0


def test_a_child_keeping_too_many_coroutines_is_replaced(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    url = redis_server.url
    import tests.apps.kept_many as kept_app
    app = Minitask("kept_many", broker=url, visibility_timeout=3.0)
    for task in kept_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log = tmp_path / "worker.log"
    try:
        worker = processes.worker("tests.apps.kept_many", "--pool", "process", "-c", "1",
                                  env={"MINITASK_BROKER_URL": url}, log=log)
        first = app.tasks["pid"].delay().get(timeout=DEADLINE)
        for _ in range(2):
            assert app.tasks["leaves"].delay().get(timeout=DEADLINE) == first
        wait_until(lambda: "coroutine(s) its tasks left running past their cancel (at most 2"
                   in log.read_text(errors="replace"), timeout=DEADLINE,
                   message="the child to say it keeps too many")
        # the next task runs in its replacement (the same child ran it for ever before)
        assert app.tasks["pid"].delay().get(timeout=DEADLINE) != first
        stop_worker(worker, log)
    finally:
        app.close()
