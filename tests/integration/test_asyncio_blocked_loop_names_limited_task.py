"""The asyncio pool's loop watch names the attempt whose code blocks the loop, with a
time limit (``timeout=``) as without one (issue 29, probe29o LOW-2).

With a time limit, the task's code runs in an asyncio task of its own (runner.limited)
the watch did not know of: the block was said as "held by code outside the tasks'
coroutines", naming no task. Real worker processes of tests/apps/blocking_loop.py on
the suite's redis-server; the worker's log is read.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long a task holds the loop (s): the watch says so after 1 s.
BLOCK = 3.0


@pytest.mark.parametrize("name", ["blocks_limited", "blocks_plain"])
def test_a_task_blocking_the_loop_is_named(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        name: str) -> None:
    url = redis_server.url
    import tests.apps.blocking_loop as blocking_app
    app = Minitask("blocking_loop", broker=url)
    for task in blocking_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.blocking_loop", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": url}, log=log)
    try:
        handle = app.tasks[name].delay(BLOCK)
        assert handle.get(timeout=DEADLINE) == "done"
    finally:
        stop_worker(worker, log)
    text = log.read_text(errors="replace")
    assert f"task {name!r} (id {handle.id}) has blocked the asyncio pool's event loop" \
        in text, text[-3000:]
    assert "held by code outside the tasks' coroutines" not in text, text[-3000:]
