"""An ``async def`` task on the thread and process pools ends its attempt when its
coroutine ends, whatever it left on its loop: an asyncio task that swallows its
cancellation, a call in the loop's default executor. Its outcome is recorded and its
slot runs the next task (``-c 1``); a coroutine that ignores the cancellation of its
time limit fails by it. ``asyncio.run`` waited for all of these without limit: the
task stayed "running" for ever, and the slot with it (issue 29)."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Iterator

import pytest

from minitask import Minitask, TaskFailed
import tests.apps.leftovers as leftovers
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 30.0


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    app = leftovers.producer(server.client())
    yield app
    app.close()


def _worker(processes: Processes, server: RedisServer, pool: str,
            tmp_path: Path) -> Any:
    return processes.worker("tests.apps.leftovers", "--pool", pool, "-c", "1",
                            env={"MINITASK_BROKER_URL": server.url},
                            log=tmp_path / "worker.log")


def _stop(worker: Any, producer: Minitask) -> None:
    assert producer.broker.queues.counts("default")["running"] == 0
    assert worker.poll() is None  # still serving
    worker.send_signal(signal.SIGTERM)
    assert exit_code(worker, timeout=DEADLINE) == 0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_an_attempt_that_returned_is_recorded_though_it_left_a_stubborn_task(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        tmp_path: Path) -> None:
    worker = _worker(processes, server, pool, tmp_path)
    left = producer.tasks["leaves_stubborn"].delay()
    assert left.get(timeout=DEADLINE) == "returned"
    assert left.status() == "succeeded"
    # the slot is free: with -c 1, nothing else would run
    assert producer.tasks["double"].delay(21).get(timeout=DEADLINE) == 42
    assert producer.tasks["plain_double"].delay(2).get(timeout=DEADLINE) == 4
    _stop(worker, producer)
    assert left.status() == "succeeded"  # not given back on the stop: never run again
    assert not producer.dead_letters()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_coroutine_that_ignores_its_time_limit_fails_by_it_and_frees_its_slot(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        tmp_path: Path) -> None:
    worker = _worker(processes, server, pool, tmp_path)
    timed = producer.tasks["ignores_cancel"].delay()
    with pytest.raises(TaskFailed) as failed:
        timed.get(timeout=DEADLINE)
    assert failed.value.exc_type == "TimeLimitExceeded"
    assert timed.status() == "failed"
    # returns at once, leaving a call that runs for minutes in the default executor:
    # it succeeds, well within its timeout of 5 s
    left = producer.tasks["leaves_executor_call"].delay()
    assert left.get(timeout=DEADLINE) == "returned"
    assert left.status() == "succeeded"
    assert producer.tasks["double"].delay(21).get(timeout=DEADLINE) == 42
    _stop(worker, producer)
    assert {dead.task_id for dead in producer.dead_letters()} == {timed.id}
