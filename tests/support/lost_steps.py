"""What the tests of steps whose marker minitask did not write share: a producer of
tests/apps/lost_steps.py's tasks on a test-owned redis-server (that module's own app
takes its broker from MINITASK_BROKER_URL, for the worker processes), those workers,
and a forged ``{state: sent}`` marker. Also what the tests of waits on steps that can
never finish (purged, gone) share: a wait that must raise ``ResultTimeout`` at once
(``ended_at_once``, ``raised_unbounded``), and ``aget`` on a loop of its own.

A test module takes the fixtures by importing them:
``from tests.support.lost_steps import producer, server  # noqa: F401``."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple

import pytest

from minitask import Minitask, ResultTimeout
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.reused_ids import server  # noqa: F401 (a fixture, for the test modules)
from tests.support.servers import RedisServer

#: How long a step may take to run, on a loaded machine (s).
DEADLINE = 60.0
#: The keys of the app's queue.
KEYS = queue_keys("lost", "default")
#: What an at-once raise may take: generous, for a loaded 2-core machine.
SLACK = 6.0


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


def raised(wait: Callable[[], Any]) -> Tuple[float, str]:
    """How long ``wait`` took to raise ResultTimeout, and its message."""
    began = time.monotonic()
    with pytest.raises(ResultTimeout) as caught:
        wait()
    return time.monotonic() - began, str(caught.value)


def ended_at_once(wait: Callable[[], Any]) -> str:
    """``wait`` (given a long timeout) raised ResultTimeout within ``SLACK``, not at
    the end of its timeout; its message."""
    took, said = raised(wait)
    assert took < SLACK, (took, said)
    return said


def raised_unbounded(wait: Callable[[], Any]) -> str:
    """``wait`` (a ``timeout=None`` wait) raised ResultTimeout at once, on a thread
    joined with a deadline: before the fix it waited for ever."""
    said: List[str] = []

    def run() -> None:
        try:
            wait()
        except ResultTimeout as exc:
            said.append(str(exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(SLACK + 2)
    assert not thread.is_alive(), "a timeout=None wait on a gone task is still waiting"
    assert said, "it ended without raising ResultTimeout"
    return said[0]


def aget(app: Minitask, handle: Any, timeout: Any) -> Any:
    """``handle.aget(timeout)`` on a loop of its own (the app's async clients closed)."""
    async def run() -> Any:
        try:
            return await handle.aget(timeout=timeout)
        finally:
            await app.aclose()

    return asyncio.run(run())
