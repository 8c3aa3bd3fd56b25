"""Whatever else goes wrong while one message is handled, no task is left running for
ever. Real worker processes of tests.apps.brittle on every pool:

- a log handler that raises (the app's log shipper down; logging's own ``handleError``
  once a task closed ``sys.stderr``) raised out of the worker's log calls on the
  outcome path: the failing task and those after it stayed "running" while the
  heartbeat kept their leases, and a process-pool worker stopped with a false "lost
  Redis" line; the worker's log now goes on after a task closed ``sys.stderr``;
- an exception whose text holds a lone surrogate (``os.fsdecode`` of a file name) was
  dead-lettered on attempt 1 as an internal EncodeError, its type and message lost;
- a process-pool child that ended with exit code 0 mid-task logged nothing until the
  task was dead-lettered WorkerLost."""
from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import tests.apps.brittle as brittle
from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
POOLS = ["thread", "asyncio", "process"]


@pytest.fixture
def client_app(server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("brittle", broker=server.client())
    for task in brittle.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries,
                 retry_backoff=task.options.retry_backoff)(task.func)
    yield app
    app.close()


def _worker(processes: Processes, server: RedisServer, log: Path, pool: str,
            **env: str) -> Any:
    return processes.worker("tests.apps.brittle", "--pool", pool, "-c", "2", "--grace", "5",
                            log=log, env={"MINITASK_BROKER_URL": server.url, **env})


def _stopped(worker: Any, log: Path) -> str:
    assert worker.poll() is None, f"the worker lives on:\n{log.read_text(errors='replace')}"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
    return log.read_text(errors="replace")


@pytest.mark.parametrize("pool", POOLS)
def test_a_log_handler_that_raises_costs_no_outcome_and_no_pool(
        processes: Processes, server: RedisServer, client_app: Minitask, tmp_path: Path,
        pool: str) -> None:
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, pool, TEST_BROKEN_HANDLER="1")
    failing = [client_app.tasks[name].delay() for name in ("fails", "afails", "fails")]
    after = [client_app.tasks["double"].delay(n) for n in range(6)]
    for handle in failing:
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)
        assert (failed.value.exc_type, failed.value.message) == ("ValueError",
                                                                 "ordinary failure")
    assert [handle.get(timeout=DEADLINE) for handle in after] == [0, 2, 4, 6, 8, 10]
    text = _stopped(worker, log)
    assert "lost Redis" not in text, text
    # said once per process (a process pool's child and supervisor each say it)
    assert 1 <= text.count("minitask: the log handler Broken raised ConnectionError") <= 3
    # the worker's own handler still wrote the lines the broken one could not
    assert text.count("ordinary failure") >= 3, text


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_task_that_closes_stderr_leaves_the_tasks_after_it_running_nowhere(
        processes: Processes, server: RedisServer, client_app: Minitask, tmp_path: Path,
        pool: str) -> None:
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, pool)
    assert client_app.tasks["close_stderr"].delay().get(timeout=DEADLINE) == "closed"
    failing = client_app.tasks["fails"].delay()
    after = [client_app.tasks["double"].delay(n) for n in range(4)]
    with pytest.raises(TaskFailed):
        failing.get(timeout=DEADLINE)
    assert [handle.get(timeout=DEADLINE) for handle in after] == [0, 2, 4, 6]
    text = _stopped(worker, log)
    # the worker's own handler goes on writing, on a stream of its own on fd 2
    assert f"task {failing.id} fails is dead" in text, text
    assert "dropped" not in text, text


@pytest.mark.parametrize("pool", POOLS)
def test_an_exception_text_utf8_cannot_carry_is_the_task_s_own_failure_retried(
        processes: Processes, server: RedisServer, client_app: Minitask, tmp_path: Path,
        pool: str) -> None:
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, pool)
    found: Dict[str, Any] = {}
    for name in ("surrogate", "asurrogate"):
        handle = client_app.tasks[name].delay()
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)
        found[handle.id] = failed.value
    first, second = found.values()
    assert (first.exc_type, first.message) == ("ValueError", "no file report-\ufffd.csv")
    assert (second.exc_type, second.message) == ("OddError", "bad \ufffd")
    dead = {task.task_id: task for task in client_app.dead_letters()}
    assert sorted(dead) == sorted(found)
    for task in dead.values():
        assert task.attempts == 2 and task.reason == "out of attempts", vars(task)
    assert "EncodeError" not in _stopped(worker, log)


def test_a_process_pool_child_exiting_0_mid_task_is_a_death_said_each_time(
        processes: Processes, server: RedisServer, client_app: Minitask,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.brittle", "--pool", "process", "-c", "1",
                              log=log, env={"MINITASK_BROKER_URL": server.url,
                                            "TEST_VISIBILITY": "2", "TEST_MAX_DELIVERIES": "2"})
    handle = client_app.tasks["exit0"].delay()
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    assert failed.value.exc_type == "WorkerLost"
    assert client_app.tasks["double"].delay(4).get(timeout=DEADLINE) == 8
    text = _stopped(worker, log)
    died = re.findall(rf"child \d+ died \(exit code 0\) while running task {handle.id}", text)
    assert len(died) == 2, text  # one line per death: max_deliveries=2
