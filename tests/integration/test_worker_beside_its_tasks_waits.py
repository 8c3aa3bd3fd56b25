"""A worker is never starved by its own tasks' waits: 120 tasks of a thread-pool
worker wait in get() for another task's result at once, and every one gets it,
with nothing in the worker's log about connections.

The waits used to hold the connections of the app's pool (100): the waits past
them failed ("Too many connections; is Redis running and reachable?"), their
tasks with them, and the worker's own calls on that pool (its heartbeat, its
cancel watch) met the same refusal."""
from __future__ import annotations

from pathlib import Path

import pytest
import redis

from minitask import Minitask, TaskFailed
from tests.apps.waiting_tasks import build
from tests.support.draining import drain
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.waiting_tasks"
DEADLINE = 60.0
TASKS = 120


def test_120_tasks_waiting_in_get_inside_a_worker_all_get_their_result(
        app: Minitask, admin: "redis.Redis[bytes]", processes: Processes,
        redis_server: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "-Q", "waits", "--pool", "thread", "-c", str(TASKS),
                              "--name", "waiter", env={"MINITASK_BROKER_URL": redis_server.url},
                              log=log)
    awaited = app.tasks["answer"].delay(7)
    waits = [app.tasks["awaits"].delay(awaited.id) for _ in range(TASKS)]
    wait_until(lambda: int(admin.info("clients")["blocked_clients"]) >= 100 or any(
        handle.status() not in ("queued", "running") for handle in waits),
        timeout=DEADLINE, message="100 waits blocked in Redis")
    assert drain(app.worker(queues=["answers"], burst=True)) == 1
    outcomes = []
    for handle in waits:
        try:
            outcomes.append(handle.get(timeout=DEADLINE))
        except TaskFailed as exc:
            outcomes.append(f"{exc.exc_type}: {exc.message}")
    assert outcomes == [7] * TASKS, [value for value in outcomes if value != 7][:3]
    assert worker.poll() is None, "the worker ended"
    said = log.read_text(errors="replace")
    assert "Too many connections" not in said and "ERROR" not in said, said[-3000:]
