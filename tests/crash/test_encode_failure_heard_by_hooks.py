"""A return value that cannot be encoded fails its attempt where everyone sees it: a
real worker on a real redis-server retries the task by its options (retries=1, the
default retry_on: an Exception from the encode function is retried once, a
KeyboardInterrupt is not) and dead-letters it after, and the task_failure,
task_retry and task_dead hooks hear each with the error.

Before (review 11, F6), the worker gave its hooks and metrics error=None for such an
attempt (task_dead heard None, task_failure nothing), and
an Exception from the encode function was dead-lettered at once while a
BaseException was retried by the task's options.
"""
from __future__ import annotations

import signal
from typing import Any, Callable, List

import pytest

from tests.apps.encode_hooks import app as worker_app
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.mark.parametrize("task,error,attempts", [
    ("returns_shy", "EncodeError", 2),  # an Exception: in retry_on, retried once
    ("returns_shier", "KeyboardInterrupt", 1),  # not in retry_on (Exception): dead
])
def test_an_encoding_failure_is_retried_by_options_and_heard(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Any,
        task: str, error: str, attempts: int) -> None:
    server = start_redis()
    client = server.client()
    from minitask import Minitask
    side = Minitask(worker_app.name, broker=server.client())
    sender = side.task(name=task, retries=1, retry_backoff=0)(lambda: None)
    worker = processes.worker("tests.apps.encode_hooks", "--pool", "thread", "-c", "1",
                              env={"MINITASK_BROKER_URL": server.url},
                              log=tmp_path / "worker.log")
    handle = sender.delay()

    def heard() -> List[str]:
        return [raw.decode() for raw in client.lrange("marks:hooks", 0, -1)]

    wait_until(lambda: any(mark.startswith("task_dead") for mark in heard()),
               timeout=DEADLINE, message="the task dead-lettered")
    [dead] = side.dead_letters()
    assert dead.task_id == handle.id and dead.attempts == attempts, (dead.attempts, dead.reason)
    assert "cannot be encoded" in dead.reason, dead.reason
    retried = [f"task_failure:{task}:{error}", f"task_retry:{task}:{error}"] * (attempts - 1)
    assert sorted(heard()) == sorted(retried + [f"task_failure:{task}:{error}",
                                                f"task_dead:{task}:{error}"]), heard()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    client.close()
    side.close()
