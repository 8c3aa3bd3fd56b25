"""A worker whose Redis client's connection pool stays full for its whole wait (a broker
URL's ``?max_connections=1&timeout=0.05``: the cancel watch's blocking read holds the
only connection) says the pool is exhausted, naming max_connections and how to raise
it, never that Redis refused a command; it retries as through a lost connection and
runs every task."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
TASKS = 100


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.pool_squeeze as squeeze
    app = Minitask("squeeze", broker=server.client())
    for task in squeeze.app.tasks.values():
        app.task(name=task.name)(task.func)
    yield app
    app.close()


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_an_exhausted_pool_is_said_as_such_and_the_worker_goes_on(
        processes: Processes, server: RedisServer, producer: Minitask, tmp_path: Path,
        pool: str) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker(
        "tests.apps.pool_squeeze", "--pool", pool, "-c", "8",
        env={"MINITASK_BROKER_URL": f"{server.url}?max_connections=1&timeout=0.05"},
        log=log)
    handles = [producer.tasks["nap"].delay(n) for n in range(TASKS)]
    assert [handle.get(timeout=DEADLINE) for handle in handles] == list(range(TASKS))

    def said() -> bool:
        return "connection pool is exhausted" in log.read_text(errors="replace")

    wait_until(said, timeout=DEADLINE, message="the exhausted pool said")
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if "connection pool is exhausted" in line]
    assert all("max_connections" in line and "?max_connections=" in line
               and "retrying with backoff" in line for line in lines), lines
    assert "Redis refused" not in text, text
    assert "refused to record" not in text, text
    assert producer.tasks["nap"].delay(-1).get(timeout=DEADLINE) == -1, "it goes on"
    assert worker.poll() is None, text
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
