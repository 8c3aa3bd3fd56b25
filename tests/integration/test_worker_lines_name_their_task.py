"""In JSON logs, the worker's own lines about one task carry its ``task_id``: "stop
requested" (``cancel(running=True)``) and the end of the grace, which names each task
it gives back, on every pool.
Real worker processes on a real redis-server."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import tests.apps.ops as ops
from tests.support.processes import Processes, exit_code, send
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.ops"
DEADLINE = 60.0


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, ops.app) as served:
        yield served


def _until(what: str, check: Callable[[], Any]) -> Any:
    end = time.monotonic() + DEADLINE
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {DEADLINE} s")
        time.sleep(0.05)


def _started(key: str) -> int:
    return int(ops.app.broker.client.llen(f"marks:started:{key}"))


def _lines(log: Path) -> List[Dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


@pytest.mark.parametrize("pool,task", [("thread", ops.long), ("asyncio", ops.along),
                                       ("process", ops.long)])
def test_stop_requested_and_grace_over_lines_carry_the_task_id(
        url: str, processes: Processes, tmp_path: Path, pool: str, task: Any) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", pool, "-c", "2", "--grace", "0.5",
                              "--log-format", "json", env={"MINITASK_BROKER_URL": url},
                              log=log)
    stopped = task.delay(f"stop-{pool}")
    _until("the first task started", lambda: _started(f"stop-{pool}") == 1)
    assert stopped.cancel(running=True) is True
    _until("the stop logged", lambda: [e for e in _lines(log)
                                       if "stop requested" in e["message"]])
    kept = task.delay(f"kept-{pool}")
    _until("the second task started", lambda: _started(f"kept-{pool}") == 1)
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0
    entries = _lines(log)
    asked = [e for e in entries if "stop requested" in e["message"]]
    # (the process pool's supervisor says it too, as it kills the child)
    assert asked and {e["task_id"] for e in asked} == {stopped.id}, asked
    given_back = [e for e in entries if "giving back task" in e["message"]]
    assert [e["task_id"] for e in given_back] == [kept.id], entries
