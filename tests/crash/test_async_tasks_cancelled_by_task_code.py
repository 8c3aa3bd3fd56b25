"""A task's code that cancels the asyncio pool's own tasks (``for t in
asyncio.all_tasks(): t.cancel()``), with a real worker process (issue 29, H1): the
attempts it cancelled said "it will be delivered again when its lease expires", but
the heartbeat renewed their leases, so they stayed running for ever and their slots
stayed taken. Each such attempt is now that attempt's failure, retried or dead by its
task's options, and the pool runs on."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Iterator

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 30.0
SAID = "cancelled by code other than minitask's"


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    """The app of tests.apps.cancelling, sending its tasks by name."""
    app = Minitask("cancelling", broker=server.client())
    yield app
    app.close()


def _started(server: RedisServer, key: str) -> None:
    """Wait until the attempt marked ``key`` runs."""
    client = server.client()
    try:
        assert client.blpop([f"marks:started:{key}"], timeout=DEADLINE), f"{key} never started"
    finally:
        client.close()


def _failed_by_cancel(handle: Any) -> None:
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    assert failed.value.exc_type == "RuntimeError"
    assert SAID in failed.value.message
    assert handle.status() == "failed"


@pytest.mark.parametrize("victim", ["victim", "victim_retried"])
def test_attempts_a_task_cancels_fail_and_the_pool_runs_on(
        processes: Processes, server: RedisServer, producer: Minitask, tmp_path: Path,
        victim: str) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.cancelling", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    cancelled = producer.send(victim, ("victim",))
    _started(server, "victim")
    canceller = producer.send("cancels_others")
    if victim == "victim":  # no retries: dead at once
        _failed_by_cancel(cancelled)
    else:  # retried (its second attempt returns at once), not dead-lettered
        assert cancelled.get(timeout=DEADLINE) == 2
    # its code ran to its end in its attempt's first step (an attempt begins at once,
    # before the pool's task awaits it): what it returned stands, though it cancelled
    # the pool's tasks around it (the victim's, and the one running its own slot)
    assert canceller.get(timeout=DEADLINE) >= 2
    # both slots are free again: later tasks run
    assert [producer.send("double", (n,)).get(timeout=DEADLINE) for n in range(4)] == [
        0, 2, 4, 6]
    dead = {letter.task_id for letter in producer.dead_letters()}
    assert dead == ({cancelled.id} if victim == "victim" else set())
    assert producer.broker.queues.counts("default")["running"] == 0
    assert worker.poll() is None  # still serving
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    assert "cancelled unexpectedly" not in log.read_text()
