"""``cancel(running=True)`` on the process pool kills the task's child on purpose: the
worker logs the stop, not a child that "died" with a task to deliver again, and the
cancelled attempt's duration is how long it ran, not how long the kill took."""
from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask, TaskFailed, chain
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


def test_a_cancelled_running_task_is_logged_as_stopped_with_the_time_it_ran(
        processes: Processes, server: RedisServer, nap: Any, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.start("-m", "minitask", "worker", "-A", "tests.apps.aio", "--pool",
                             "process", "-c", "1", "--loglevel", "INFO", log=log,
                             env={"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": "2"})
    client = server.client()
    handle = nap.delay("long", 30.0)
    wait_until(lambda: client.llen("marks:started:long") == 1, timeout=DEADLINE,
               message="the long task started")
    time.sleep(1.0)  # it runs for a while before the stop: the duration must say so
    assert handle.cancel(running=True) is True
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    assert failed.value.exc_type == "Cancelled"
    assert nap.delay("next", 0.0).get(timeout=DEADLINE) == "next"  # a new child serves
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text()
    assert "died (exit code" not in text and "delivered again" not in text, text
    ran = re.search(rf"task {handle.id} \S+ cancelled while running, after ([0-9.]+) s", text)
    assert ran is not None, text
    assert float(ran.group(1)) >= 0.9, text


@pytest.mark.parametrize("pool", ["process", "thread"])
def test_a_running_workflow_step_stopped_on_request_cancels_the_steps_after_it(
        processes: Processes, server: RedisServer, nap: Any, pool: str) -> None:
    worker = processes.start("-m", "minitask", "worker", "-A", "tests.apps.aio", "--pool",
                             pool, "-c", "1", env={"MINITASK_BROKER_URL": server.url,
                                                   "TEST_VISIBILITY": "2"})
    client = server.client()
    # the process pool kills the step's child at once; a thread cannot be stopped, so
    # there the step runs to its end (it checks no cancel_requested) and the steps
    # after it are cancelled then: 10 s is room enough to ask while it runs, where 30 s
    # cost 20 s of waiting for nothing
    seconds = 30.0 if pool == "process" else 10.0
    last = chain(nap.s("step-1", seconds).set(task_id=f"{pool}-step-1"),
                 nap.si("step-2", 0.0)).delay()
    wait_until(lambda: client.llen("marks:started:step-1") == 1, timeout=DEADLINE,
               message="the first step started")
    step = Minitask("aio", broker=server.client()).handle(f"{pool}-step-1")
    assert step.status() == "running"
    assert step.cancel(running=True) is True
    with pytest.raises(TaskFailed, match=f"step {pool}-step-1 .* was cancelled"):
        last.get(timeout=DEADLINE)
    assert last.status() == "cancelled" and client.llen("marks:started:step-2") == 0
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0


def test_a_foreign_cancels_key_of_one_queue_leaves_the_others_stoppable(
        processes: Processes, server: RedisServer, nap: Any) -> None:
    from minitask.broker.keys import queue_keys
    client = server.client()
    client.set(queue_keys("aio", "bad").cancels, b"not a stream")
    worker = processes.start("-m", "minitask", "worker", "-A", "tests.apps.aio", "-Q",
                             "default,bad", "--pool", "asyncio", "-c", "2",
                             env={"MINITASK_BROKER_URL": server.url})
    handle = nap.delay("long-one", 30.0)
    wait_until(lambda: client.llen("marks:started:long-one") == 1, timeout=DEADLINE,
               message="the long task started")
    assert handle.cancel(running=True) is True
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=10)  # it waited its whole 30 s when the watch was down
    assert failed.value.exc_type == "Cancelled"
    assert client.get(queue_keys("aio", "bad").cancels) == b"not a stream"  # left as it was
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
