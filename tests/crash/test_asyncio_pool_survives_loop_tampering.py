"""Task code that tampers with the asyncio pool's event loop, with a real worker process
(issue 29, probe 18). A task factory that raises (or returns no Task) made every later
attempt fail as it began, its slot and lease held for ever, until the worker served
nothing; the loop's default executor shut down (or replaced by one shut down) made every
later plain-function task dead. The pool now makes its own asyncio tasks without the
loop's factory and runs plain functions in an executor of its own: later tasks run."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 30.0


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    """The app of tests.apps.hostile_loop, sending its tasks by name."""
    app = Minitask("hostile_loop", broker=server.client())
    yield app
    app.close()


@pytest.mark.parametrize("hostile, kind", [
    ("sets_factory", "raises"), ("sets_factory", "no_task"),
    ("ends_executor", "shutdown"), ("ends_executor", "replaced")])
def test_later_tasks_run_after_a_task_tampers_with_the_loop(
        processes: Processes, server: RedisServer, producer: Minitask, tmp_path: Path,
        hostile: str, kind: str) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.hostile_loop", "--pool", "asyncio", "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    assert producer.send(hostile, (kind,)).get(timeout=DEADLINE) == kind
    # more tasks than slots, each kind: every slot is used again and again
    handles = [producer.send(name, (n,)) for n in range(4)
               for name in ("double", "double_timed", "triple")]
    assert [handle.get(timeout=DEADLINE) for handle in handles] == [
        factor * n for n in range(4) for factor in (2, 2, 3)]
    assert producer.dead_letters() == []
    assert producer.broker.queues.counts("default")["running"] == 0
    assert worker.poll() is None  # still serving
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
