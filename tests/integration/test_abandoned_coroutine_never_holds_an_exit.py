"""A coroutine that takes every exception (``except BaseException: pass``) and that
an attempt's own event loop abandoned (thread and process pools) never hangs the
worker's exit (issue 29).

Collecting such an abandoned asyncio task closes its coroutine: it took the
GeneratorExit, awaited again, took the RuntimeError of a loop no longer running, and
so on for ever, in whichever thread collected it. The thread pool's worker logged
"stopped" and never exited. Abandoned tasks are now kept from the collector, and the
exit says how many it leaves unclosed.

Real worker processes of tests/apps/overrun.py on the suite's redis-server.
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


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_exits_past_an_abandoned_coroutine_that_takes_everything(
        pool: str, redis_server: RedisServer, admin: Any, processes: Processes,
        tmp_path: Path) -> None:
    import tests.apps.overrun as overrun_app
    app = Minitask("overrun", broker=redis_server.url, visibility_timeout=3.0)
    for task in overrun_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log = tmp_path / "worker.log"
    try:
        worker = processes.worker("tests.apps.overrun", "--pool", pool, "-c", "1",
                                  env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
        handle = app.tasks["stubborn"].delay(str(tmp_path / "never"))
        wait_until(lambda: handle.status() == "failed", timeout=DEADLINE,
                   message="the stubborn attempt to fail at its time limit")
        assert app.tasks["quick"].delay(3).get(timeout=DEADLINE) == 3  # its slot runs on
        stop_worker(worker, log)  # exit 0 within the deadline: it hung on the thread pool
        text = log.read_text(errors="replace")
        if pool == "thread":  # its loop abandoned it, named once
            assert f"[stubborn {handle.id}]" in text and "Task-" in text, text
            assert "1 coroutine(s) its tasks left running past their cancel" in text, text
        else:  # the process pool kills the child at the limit: nothing is abandoned
            assert "killed its process" in text, text
    finally:
        app.close()
