"""A chain A -> B -> C -> D whose A's worker is SIGKILLed after A sent B and before A's
ack: A is delivered again (at least once) once B has run, while C is still running. B's
marker says "sent" and its queue holds neither its message nor, for an ignore_result
step or one whose result was forgotten, its result: the look for lost steps took it for
a forged marker and cancelled D, so a healthy chain failed ("chain FAILED" instead of
11). B sent C before its ack, so C's marker says B ran: nothing is cancelled now. Real
worker processes (one SIGKILLed) and a test-owned redis-server; A goes to queue 'first',
served only by the worker that crashes and then by the one that redelivers it, so the
order is the test's: B done, C running, then A again."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from minitask import Minitask, chain
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

DEADLINE = 60.0
KEYS = queue_keys("crashchain", "default")


def _add(x: int, y: int) -> int:
    return x + y


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    """The tasks by name (tests.apps.crash_chain wraps advance to crash: not imported)."""
    app = Minitask("crashchain", broker=server.client())
    app.task(name="add")(_add)
    app.task(name="quiet_add", ignore_result=True)(_add)
    app.task(name="held_add")(_add)
    yield app
    app.close()


def _until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, f"waited {DEADLINE:.0f} s for {what}"
        time.sleep(0.05)


def _worker(processes: Processes, server: RedisServer, queue: str, log: Path,
            **env: str) -> Any:
    return processes.worker("tests.apps.crash_chain", "--pool", "thread", "-c", "2",
                            "-Q", queue, log=log,
                            env={"MINITASK_BROKER_URL": server.url, **env})


@pytest.mark.parametrize("middle", ["ignore_result", "result kept", "result forgotten"])
def test_a_step_delivered_again_after_a_crash_cancels_nothing_that_ran(
        middle: str, processes: Processes, server: RedisServer, producer: Minitask,
        tmp_path: Path) -> None:
    add, held = producer.tasks["add"], producer.tasks["held_add"]
    mid = producer.tasks["quiet_add" if middle == "ignore_result" else "add"]
    crash, release = tmp_path / "crashed", tmp_path / "release"
    handle = chain(add.si(1, 1).set(task_id="c-1", queue="first"),
                   mid.s(2).set(task_id="c-2"), held.s(3).set(task_id="c-3"),
                   add.s(4).set(task_id="c-4")).delay()
    logs = [tmp_path / f"w{i}.log" for i in (1, 2, 3)]
    first = _worker(processes, server, "first", logs[0], CRASH_FLAG=str(crash))
    assert first.wait(timeout=DEADLINE) == -signal.SIGKILL, logs[0].read_text()
    assert crash.exists()
    steps = _worker(processes, server, "default", logs[1], HELD_FLAG=str(release))
    c3 = producer.handle("c-3")
    _until("c-3 running (c-2 ran and sent it)", lambda: c3.status() == "running")
    assert producer.handle("c-1").status() == "running"  # leased by the killed worker
    if middle == "result forgotten":  # once c-2's ack is in: c-3 is sent before it
        _until("c-2 acked and forgotten", lambda: producer.handle("c-2").forget())
    if middle != "result kept":
        assert server.client().exists(KEYS.result("c-2")) == 0  # nowhere now
    again = _worker(processes, server, "first", logs[2])
    c1 = producer.handle("c-1")
    _until("c-1 delivered again and acked", lambda: c1.status() == "succeeded")
    assert server.client().hget(KEYS.once("c-4"), "state") is None  # D not cancelled
    release.touch()
    assert handle.get(timeout=DEADLINE) == 11
    assert producer.handle("c-4").status() == "succeeded"
    for worker, log in ((steps, logs[1]), (again, logs[2])):
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
    said = "".join(log.read_text(errors="replace") for log in logs)
    assert "end cancelled" not in said and "ERROR" not in said, said
