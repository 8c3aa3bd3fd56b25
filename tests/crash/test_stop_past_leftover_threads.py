"""A stopped worker's process ends though its tasks left threads running that Python's
exit would wait for: a call in a loop's default executor (``run_in_executor(None,
...)``), a thread that is not a daemon. They get a second, are named in one warning,
and the process exits 0 without them, on every pool; before, a worker that had
logged "stopped" stayed alive for as long as they ran, past its grace, or (process
pool) used up the whole grace and had its child killed (issue 29)."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
import tests.apps.leftovers as leftovers
from tests.support.processes import Processes, exit_code, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 30.0
#: The worker's grace: far longer than the stop may take with no task running.
GRACE = 60
#: How long the stop may take: the second the leftovers get, and the worker's own end.
STOPS_WITHIN = 15.0


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    app = leftovers.producer(server.client())
    yield app
    app.close()


#: What a task leaves (its task, the thread's name in the warning), and the signal sent.
LEFT = {"executor": ("leaves_executor_call", "asyncio_0", signal.SIGTERM),
        "thread": ("leaves_thread", "left-by-a-task", signal.SIGINT)}


@pytest.mark.parametrize("pool", ["asyncio", "thread", "process"])
@pytest.mark.parametrize("left", sorted(LEFT))
def test_a_stopped_worker_exits_though_its_tasks_left_threads_running(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        left: str, tmp_path: Path) -> None:
    task, name, signum = LEFT[left]
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.leftovers", "--pool", pool, "-c", "1",
                              "--grace", str(GRACE), env={"MINITASK_BROKER_URL": server.url},
                              log=log)
    assert producer.tasks[task].delay().get(timeout=DEADLINE) == "returned"
    assert producer.broker.queues.counts("default")["running"] == 0

    asked = time.monotonic()
    send(worker, signum)

    assert exit_code(worker, timeout=STOPS_WITHIN) == 0, log.read_text()
    assert time.monotonic() - asked < STOPS_WITHIN
    logged = log.read_text()
    assert name in logged  # named in the warning
    assert "killed" not in logged  # the process pool's children ended on their own


def test_a_plain_task_of_the_asyncio_pool_running_past_the_grace_does_not_keep_it_alive(
        processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    """It runs in the pool's executor, whose threads Python's exit joins: the worker
    gave its task back at the end of the grace, logged "stopped", and stayed alive
    for as long as the function ran."""
    log = tmp_path / "worker.log"
    grace = 1
    worker = processes.worker("tests.apps.leftovers", "--pool", "asyncio", "-c", "1",
                              "--grace", str(grace), env={"MINITASK_BROKER_URL": server.url},
                              log=log)
    handle = producer.tasks["blocks"].delay()
    client = server.client()
    try:  # running in its thread (a lease alone comes before the thread is made)
        wait_until(lambda: client.exists(leftovers.BLOCKS_STARTED), timeout=DEADLINE,
                   message="running")
    finally:
        client.close()

    asked = time.monotonic()
    send(worker, signal.SIGTERM)

    assert exit_code(worker, timeout=grace + STOPS_WITHIN) == 0, log.read_text()
    assert time.monotonic() - asked < grace + STOPS_WITHIN
    assert handle.status() == "queued"  # given back at the end of the grace
    assert "minitask-asyncio-call" in log.read_text()  # the thread, named in the warning
