"""A task's code that stops the asyncio pool's event loop, with a real worker process
(issue 29): the loop thread ended, the worker beat on and ran nothing, silently, and a
SIGTERM took the whole grace. The loop runs again, said with an ERROR naming the attempt."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 20.0


def test_a_task_stopping_the_loop_stalls_nothing(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path) -> None:
    app, nap = producer
    import tests.apps.aio as aio
    stopper = app.task(name=aio.stops_loop.name)(aio.stops_loop.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.aio", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    stopped = stopper.delay("stopper")
    assert stopped.get(timeout=DEADLINE) == "stopper"  # hung for ever: the loop was gone
    assert nap.delay("after", 0.0).get(timeout=DEADLINE) == "after"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0  # no grace spent on a dead loop
    said = log.read_text()
    assert f"event loop was stopped by a task's code (running: {stopped.id})" in said
