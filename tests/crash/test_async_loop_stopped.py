"""A task's code that stops the asyncio pool's event loop, with a real worker process
(issue 29): the loop thread ended, the worker beat on and ran nothing, silently, and a
SIGTERM took the whole grace. Now, as on the thread and process pools, a running
attempt whose code calls ``loop.stop()`` fails with RuntimeError (the loop, every
attempt's, runs on); code left behind by an attempt that has ended stops it, and it
runs again at once, said with an ERROR naming whose code stopped it."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 20.0


def test_a_task_stopping_the_loop_stalls_nothing(
        processes: Processes, server: RedisServer, producer: Any, tmp_path: Path) -> None:
    app, nap = producer
    import tests.apps.aio as aio
    stopper = app.task(name=aio.stops_loop.name, retries=0)(aio.stops_loop.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.aio", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    stopped = stopper.delay("stopper")
    with pytest.raises(TaskFailed) as failed:  # hung for ever: the loop was gone
        stopped.get(timeout=DEADLINE)
    assert failed.value.exc_type == "RuntimeError"
    assert "its code stopped the event loop (loop.stop())" in failed.value.message
    assert nap.delay("after", 0.0).get(timeout=DEADLINE) == "after"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0  # no grace spent on a dead loop
    assert "was stopped" not in log.read_text()  # it was not: nothing to say


def test_code_left_behind_that_stops_the_loop_is_named(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    import tests.apps.escaping as escaping
    app = Minitask("escaping", broker=server.client())
    for task in escaping.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries)(task.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.escaping", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    try:
        left = app.tasks["leaves_stopper"].delay()
        assert left.get(timeout=DEADLINE) == "parent returned"
        line = (f"event loop was stopped (loop.stop()) by the code of task "
                f"'leaves_stopper' (id {left.id}) after its attempt ended")
        until = time.monotonic() + DEADLINE
        while line not in log.read_text():
            assert time.monotonic() < until, log.read_text()
            time.sleep(0.05)
        assert app.tasks["double"].delay(4).get(timeout=DEADLINE) == 8  # it runs again
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0
    finally:
        app.close()
