"""What the tests of steps whose marker minitask did not write share: a producer of
tests/apps/lost_steps.py's tasks on a test-owned redis-server (that module's own app
takes its broker from MINITASK_BROKER_URL, for the worker processes), those workers,
and a forged ``{state: sent}`` marker.

A test module takes the fixtures by importing them:
``from tests.support.lost_steps import producer, server  # noqa: F401``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.reused_ids import server  # noqa: F401 (a fixture, for the test modules)
from tests.support.servers import RedisServer

#: How long a step may take to run, on a loaded machine (s).
DEADLINE = 60.0
#: The keys of the app's queue.
KEYS = queue_keys("lost", "default")


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:  # noqa: F811 (the fixture above)
    """An app named as tests.apps.lost_steps' (so its keys), with its tasks and their
    options, on the test's server, closed after the test."""
    import tests.apps.lost_steps as lost
    app = Minitask("lost", broker=server.client())
    app.task(name="add")(lost.add.func)
    app.task(name="total")(lost.total.func)
    app.task(name="quiet_add", ignore_result=True)(lost.quiet_add.func)
    app.task(name="limited_add", max_running=5)(lost.limited_add.func)
    yield app
    app.close()


def lost_worker(processes: Processes, redis_server: RedisServer, log: Path) -> Any:
    """A worker process of tests.apps.lost_steps on ``redis_server`` (two threads), its
    output in ``log``."""
    return processes.worker("tests.apps.lost_steps", "--pool", "thread", "-c", "2",
                            env={"MINITASK_BROKER_URL": redis_server.url}, log=log)


def forge_sent(client: Any, task_id: str) -> str:
    """{state: sent} over the reservation delay() made for the step's explicit id (it
    must be reserved, not sent); the marker's key."""
    marker = KEYS.once(task_id)
    assert client.hget(marker, "state") is None  # reserved by delay(), not sent
    client.hset(marker, "state", "sent")
    return marker
