"""A stop during an overrun's hold never gives back the slot's next task a second time
(review29e F1).

A coroutine that takes its cancel holds its asyncio slot; the task the slot had leased
with the attempt's outcome goes back to its queue as the hold begins, and another
worker runs it. The slot still kept it as its next job, and the worker's holdings
listed it: the stop's cancel (the grace over) ended the hold and gave it back again,
and release.lua, which knows no owner, took the other worker's lease and queued the
task again: it ran twice at once. Now it is given back once, and no more the slot's.

Real worker processes of tests/apps/overrun_follow.py on the suite's redis-server,
stopped with SIGTERM.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Bound on a wait for work a worker does (s), on a loaded machine.
DEADLINE = 60.0
#: How long ``mark`` runs (s): the stopped worker's exit comes within it.
MARK = 8.0


def test_a_stop_during_the_hold_gives_the_next_task_back_once(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path) -> None:
    url = redis_server.url
    import tests.apps.overrun_follow as follow_app
    app = Minitask("overrun_follow", broker=url, visibility_timeout=3.0)
    for task in follow_app.app.tasks.values():
        app.task(name=task.name, timeout=task.options.timeout,
                 retries=task.options.retries)(task.func)
    env = {"MINITASK_BROKER_URL": url}
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    try:
        first = processes.worker("tests.apps.overrun_follow", "--pool", "asyncio", "-c", "1",
                                 "--grace", "1", env=env, log=first_log)
        stubborn = app.tasks["stubborn"].delay(str(tmp_path / "never"))
        wait_until(lambda: stubborn.status() == "running", timeout=DEADLINE,
                   message="the stubborn task to start")
        mark = app.tasks["mark"].delay(MARK)  # leased with stubborn's outcome
        wait_until(lambda: stubborn.status() == "failed", timeout=DEADLINE,
                   message="the stubborn attempt to fail at its time limit")
        wait_until(lambda: "did not end within" in first_log.read_text(errors="replace"),
                   timeout=DEADLINE, message="the slot to be held")
        wait_until(lambda: mark.status() == "queued", timeout=DEADLINE,
                   message="the held slot's next task to go back to its queue")
        assert admin.llen("runs") == 0  # (the held slot never ran it)

        second = processes.worker("tests.apps.overrun_follow", "--pool", "asyncio", "-c",
                                  "2", "--grace", "30", env=env, log=second_log)
        wait_until(lambda: admin.llen("runs") == 1, timeout=DEADLINE,
                   message="the second worker to start the task")
        first.send_signal(signal.SIGTERM)  # the grace over, its cancel ends the hold
        assert first.wait(timeout=DEADLINE) == 0, first_log.read_text(errors="replace")
        assert mark.get(timeout=DEADLINE) == second.pid
        runs = [run.decode() for run in admin.lrange("runs", 0, -1)]
        # it ran twice, at once, in the second worker, before the fix
        assert runs == [str(second.pid)], (runs, first_log.read_text(errors="replace"))
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=DEADLINE) == 0, second_log.read_text(errors="replace")
        assert admin.llen("runs") == 1
    finally:
        app.close()
