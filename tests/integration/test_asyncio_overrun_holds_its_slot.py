"""An ``async def`` task whose coroutine takes the cancel at its time limit and goes
on awaiting (``except BaseException: pass``) holds its slot of the asyncio pool until
it ends (issue 29, probe29h L1).

It was "left running" with one ERROR that named no task, its slot running the next
task at once: such coroutines piled up without bound, and ``minitask status`` said
nothing. Now its attempt fails with TimeLimitExceeded as before (at least once: its
outcome is recorded), it is said once naming its task and id, its slot takes no work
until it ends, and the worker's heartbeat (``minitask status``) counts it.

Real worker processes of tests/apps/overrun.py on the suite's redis-server.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from minitask import Minitask
from minitask.errors import TaskFailed
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long a task that must not start is watched for (s): it started within
#: milliseconds before the fix.
WATCH = 3.0


def status(url: str, cwd: Path) -> Dict[str, Any]:
    """``minitask status --json`` of the app, run as an operator runs it."""
    done = subprocess.run([sys.executable, "-m", "minitask", "status", "-A",
                           "tests.apps.overrun", "--json"], cwd=cwd, capture_output=True,
                          env={**os.environ, "MINITASK_BROKER_URL": url}, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report: Dict[str, Any] = json.loads(done.stdout)
    return report


def overrun(url: str, cwd: Path) -> List[Any]:
    return [worker.get("overrun") for worker in status(url, cwd)["workers"]]


def test_a_coroutine_left_running_holds_its_slot_and_is_counted(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    url = redis_server.url
    import tests.apps.overrun as overrun_app
    app = Minitask("overrun", broker=url, visibility_timeout=3.0)
    for task in overrun_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log, release = tmp_path / "worker.log", tmp_path / "release"
    cwd = processes.cwd
    try:
        worker = processes.worker("tests.apps.overrun", "--pool", "asyncio", "-c", "2",
                                  env={"MINITASK_BROKER_URL": url}, log=log)
        assert app.tasks["quick"].delay(0).get(timeout=DEADLINE) == 0  # up, serving
        stubborn = [app.tasks["stubborn"].delay(str(release)) for _ in range(2)]
        # the outcome is recorded at once, by the task's options (at least once)
        wait_until(lambda: all(h.status() == "failed" for h in stubborn), timeout=DEADLINE,
                   message="the stubborn attempts to fail at their time limit")
        for handle in stubborn:
            with pytest.raises(TaskFailed) as failed:
                handle.get(timeout=DEADLINE)
            assert failed.value.exc_type == "TimeLimitExceeded", failed.value
        wait_until(lambda: overrun(url, cwd) == [2], timeout=DEADLINE,
                   message="the heartbeat to count 2 coroutines left running")
        text = log.read_text(errors="replace")
        for handle in stubborn:  # said once each, naming the task and its id
            said = [line for line in text.splitlines()
                    if handle.id in line and "did not end within" in line]
            assert len(said) == 1 and "stubborn" in said[0], text
        assert "every slot of the asyncio pool (2) is held" in text, text
        shown = subprocess.run([sys.executable, "-m", "minitask", "status", "-A",
                                "tests.apps.overrun"], cwd=cwd, capture_output=True,
                               env={**os.environ, "MINITASK_BROKER_URL": url},
                               timeout=DEADLINE).stdout.decode(errors="replace")
        assert "LEFT RUNNING: 2 task(s)" in shown, shown

        # both slots held: the worker takes no work past them
        waiting = app.tasks["quick"].delay(7)
        time.sleep(WATCH)
        assert waiting.status() == "queued", waiting.status()

        release.write_text("")  # the coroutines end: their slots take work again
        assert waiting.get(timeout=DEADLINE) == 7
        wait_until(lambda: overrun(url, cwd) == [0], timeout=DEADLINE,
                   message="the heartbeat to count none left running")
        text = log.read_text(errors="replace")
        assert text.count("its coroutine left running has ended") == 2, text
        assert all(h.status() == "failed" for h in stubborn)  # their outcome stands
        stop_worker(worker, log)
    finally:
        app.close()


def test_a_cancelled_coroutine_left_running_is_counted_and_the_worker_still_stops(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    """cancel(running=True) of a coroutine that takes it and goes on: the attempt ends
    cancelled, the coroutine is counted and holds its slot, and a SIGTERM still stops
    the worker (exit 0: the stop cancels the slot's wait, not the coroutine's end)."""
    url = redis_server.url
    import tests.apps.overrun as overrun_app
    app = Minitask("overrun", broker=url, visibility_timeout=3.0)
    for task in overrun_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log, cwd = tmp_path / "worker.log", processes.cwd
    try:
        worker = processes.worker("tests.apps.overrun", "--pool", "asyncio", "-c", "1",
                                  "--grace", "1", env={"MINITASK_BROKER_URL": url}, log=log)
        handle = app.tasks["stubborn_long"].delay(str(tmp_path / "never"))
        wait_until(lambda: handle.status() == "running", timeout=DEADLINE,
                   message="the stubborn task to start")
        handle.cancel(running=True)
        wait_until(lambda: handle.status() == "cancelled", timeout=DEADLINE,
                   message="the attempt to end cancelled")
        wait_until(lambda: overrun(url, cwd) == [1], timeout=DEADLINE,
                   message="the heartbeat to count 1 coroutine left running")
        text = log.read_text(errors="replace")
        assert f"task stubborn_long {handle.id}: its coroutine did not end" in text, text
        assert "(cancel(running=True))" in text, text
        stop_worker(worker, log)  # exit 0, within the deadline (it hung, collecting it)
        text = log.read_text(errors="replace")
        assert "1 coroutine(s) its tasks left running past their cancel were never " in text
    finally:
        app.close()


def test_a_coroutine_that_takes_the_stops_cancel_never_holds_the_exit(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    """The grace over, the stop cancels a coroutine that takes it and goes on: the task
    is given back, and the worker exits 0 (collecting that coroutine would never end)."""
    url = redis_server.url
    import tests.apps.overrun as overrun_app
    app = Minitask("overrun", broker=url, visibility_timeout=3.0)
    for task in overrun_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    log = tmp_path / "worker.log"
    try:
        worker = processes.worker("tests.apps.overrun", "--pool", "asyncio", "-c", "1",
                                  "--grace", "1", env={"MINITASK_BROKER_URL": url}, log=log)
        handle = app.tasks["stubborn_long"].delay(str(tmp_path / "never"))
        wait_until(lambda: handle.status() == "running", timeout=DEADLINE,
                   message="the stubborn task to start")
        stop_worker(worker, log)  # exit 0 within the deadline
        assert handle.status() == "queued", handle.status()  # given back
        text = log.read_text(errors="replace")
        assert "1 coroutine(s) its tasks left running past their cancel were never " in text
    finally:
        app.close()
