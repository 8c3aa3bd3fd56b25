"""A BaseException from a task is that attempt's failure on every pool: recorded with its
type, dead-lettered by the task's options, and the pool goes on running the tasks leased
after it; a coroutine that blocks the loop past its timeout is a time-limit failure. A
real signal to the worker still means a graceful stop (exit 0)."""
from __future__ import annotations

import signal
from typing import Iterator

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
RAISES = {"async_interrupt": "KeyboardInterrupt", "async_exit": "SystemExit",
          "async_mine": "Mine", "plain_interrupt": "KeyboardInterrupt",
          "plain_exit": "SystemExit", "blocks_the_loop": "TimeLimitExceeded"}


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.raising as raising
    app = Minitask("raising", broker=server.client())
    for task in raising.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries,
                 timeout=task.options.timeout)(task.func)
    yield app
    app.close()


@pytest.mark.parametrize("pool", ["asyncio", "thread", "process"])
def test_base_exceptions_are_the_attempts_failures_and_the_pool_runs_on(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str) -> None:
    worker = processes.worker("tests.apps.raising", "--pool", pool, "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url})
    failing = {name: producer.tasks[name].delay() for name in RAISES}
    after = [producer.tasks["double"].delay(n) for n in range(10)]
    assert [handle.get(timeout=DEADLINE) for handle in after] == [2 * n for n in range(10)]
    for name, exc_type in RAISES.items():
        with pytest.raises(TaskFailed) as failed:
            failing[name].get(timeout=DEADLINE)
        assert failed.value.exc_type == exc_type, name
        assert failing[name].status() == "failed", name
    assert {d.task_id for d in producer.dead_letters()} == {h.id for h in failing.values()}
    assert producer.broker.queues.counts("default")["running"] == 0
    assert worker.poll() is None  # still serving
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
