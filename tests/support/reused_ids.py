"""What the workflow step-id tests share: a test-owned redis-server, and a producer of
tests/apps/reused_ids.py's tasks on it (that module's own app takes its broker from
MINITASK_BROKER_URL, for the worker processes), and those workers.

A test module takes the fixtures by importing them:
``from tests.support.reused_ids import producer, server  # noqa: F401``."""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.servers import RedisServer

#: How long a step may take to run, on a loaded machine (s).
DEADLINE = 60.0
#: The keys of the app's two queues.
KEYS = queue_keys("reused", "default")
OTHER = queue_keys("reused", "other")


def reused_producer(broker: Any, **options: Any) -> Minitask:
    """An app named as tests.apps.reused_ids' (so its keys), with its tasks and their
    limits, on ``broker`` (a client or URL); ``options``: the app's (``result_ttl``)."""
    import tests.apps.reused_ids as reused
    app = Minitask("reused", broker=broker, **options)
    for task in reused.app.tasks.values():
        app.task(name=task.name, max_running=task.options.limits.max_running or None)(task.func)
    return app


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    """A fresh redis-server of this test only."""
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    """reused_producer() on the test's server, closed after the test."""
    app = reused_producer(server.client())
    yield app
    app.close()


def reused_worker(processes: Processes, server: RedisServer, log: Path,
                  *args: str) -> "subprocess.Popen[bytes]":
    """A worker process of tests.apps.reused_ids on ``server`` (thread pool; ``args``:
    more options), its output in ``log``."""
    return processes.worker("tests.apps.reused_ids", "--pool", "thread", *args,
                            env={"MINITASK_BROKER_URL": server.url}, log=log)


def stop_worker(worker: "subprocess.Popen[bytes]", log: Path) -> None:
    """Stop ``worker`` as an operator does (SIGTERM); it must exit 0."""
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
