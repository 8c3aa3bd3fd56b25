"""What a worker runs now, as its heartbeat says (``running_ids``), with real worker
processes on the suite's redis-server: the thread and asyncio pools list the tasks
they started (never the prefetched ones waiting), the process pool its children's;
the list empties as the tasks end; ``/api/workers`` hands it out as a JSON list."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

import tests.apps.ops as ops
from minitask.dashboard import views
from tests.integration.test_operators_view_redis import APP, started, until, url  # noqa: F401
from tests.support.processes import Processes

pytestmark = pytest.mark.integration


def runs(name: str) -> List[str]:
    for info in views.workers(ops.app)["workers"]:
        if info["name"] == name:
            return list(info["running_ids"])
    return []


def info_of(name: str) -> Dict[str, Any]:
    return next(info for info in views.workers(ops.app)["workers"] if info["name"] == name)


@pytest.mark.parametrize("pool,task", [("thread", ops.long), ("process", ops.long),
                                       ("asyncio", ops.along)])
def test_the_heartbeat_lists_the_tasks_the_worker_runs(
        url: str, processes: Processes, pool: str, task: Any) -> None:  # noqa: F811
    name = f"runs-{pool}"
    # a process pool's child prefetches for itself: 1, or one child takes all three
    prefetch = "1" if pool == "process" else "4"
    processes.worker(APP, "--pool", pool, "-c", "2", "--prefetch", prefetch, "--name", name,
                     env={"MINITASK_BROKER_URL": url})
    handles = [task.delay(pool) for _ in range(3)]  # two run, one waits
    until("two tasks started", lambda: started(pool) == 2)
    running = set(until("the heartbeat listing them", lambda: runs(name)
                        if len(runs(name)) == 2 else None))
    assert running < {handle.id for handle in handles}
    # the two that started (they mark it), not the one leased and waiting (its status
    # says running too: it is leased)
    marked = ops.app.broker.client.lrange(f"marks:started:{pool}", 0, -1)
    assert running == {task_id.decode() for task_id in marked}
    assert isinstance(info_of(name)["concurrency"], int)
    for handle in handles:
        handle.cancel(running=True)
    until("the list empty again", lambda: info_of(name)["running_ids"] == [])
