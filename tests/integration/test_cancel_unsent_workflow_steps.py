"""``cancel()`` of a workflow step not sent yet: a chord's body while a header member
runs, a chain's later step while the step before it runs. It answered False (no
message to withdraw) and the step ran later all the same. Now it answers True, the
step is never sent, its status reads ``cancelled``, ``get()`` raises ``TaskFailed``
(``Cancelled``), and what follows it ends cancelled rather than wait for ever; through
``cancel()``, ``acancel()`` and ``minitask cancel``. A step sent already (or ended) is
answered as any task. A real worker process and a test-owned redis-server."""
from __future__ import annotations

import asyncio
import random
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import minitask.cli.cancel as cancel_command
from minitask import Minitask, TaskFailed, chain, chord
from minitask.broker.keys import queue_keys
from tests.support.cli import operate_with, run
from tests.support.processes import Processes
from tests.support.reused_ids import server, stop_worker  # noqa: F401 (server: a fixture)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: How long a step may take to run, on a loaded machine (s).
DEADLINE = 60.0
#: The keys of the app's queue.
KEYS = queue_keys("unsent", "default")


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:  # noqa: F811 (the fixture)
    """An app named as tests.apps.unsent_steps' (so its keys), with its tasks, on the
    test's server, closed after the test."""
    import tests.apps.unsent_steps as unsent
    app = Minitask("unsent", broker=server.client())
    for task in unsent.app.tasks.values():
        app.task(name=task.name)(task.func)
    yield app
    app.close()


def _worker(processes: Processes, server: RedisServer, log: Path,  # noqa: F811
            threads: int = 1) -> "subprocess.Popen[bytes]":
    return processes.worker("tests.apps.unsent_steps", "--pool", "thread", "-c", str(threads),
                            env={"MINITASK_BROKER_URL": server.url}, log=log)


def _wait(done: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {DEADLINE} s"
        time.sleep(0.02)


def _ran(client: Any) -> List[str]:
    return [name.decode() for name in client.lrange("ran", 0, -1)]


def _hold(client: Any, gate: str) -> None:
    """Wait until ``held(gate)`` runs."""
    _wait(lambda: client.llen(f"started:{gate}") > 0, f"held({gate!r}) to start")


def _settle(producer: Minitask) -> None:
    """A task sent now and run by the one-thread worker: what was sent before it (a step
    that should not have been) is run by then."""
    assert producer.tasks["quick"].delay().get(timeout=DEADLINE) == 1


def _assert_cancelled(handle: Any, task_id: str) -> None:
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=DEADLINE)
    assert ended.value.exc_type == "Cancelled", str(ended.value)
    assert ended.value.task_id == task_id, str(ended.value)
    assert handle.status() == "cancelled"


def test_a_chord_body_cancelled_while_a_header_member_runs_never_runs(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    client = server.client()
    held, noted = producer.tasks["held"], producer.tasks["noted"]
    handle = chord([held.si("c").set(task_id="c-1"), noted.si(2, "member")],
                   noted.s("body")).delay()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log)
    _hold(client, "c")
    assert handle.cancel() is True
    assert handle.status() == "cancelled"
    client.set("open:c", 1)
    _wait(lambda: producer.handle("c-1").status() == "succeeded", "the member to end")
    _assert_cancelled(handle, handle.id)
    _settle(producer)
    assert _ran(client) == ["member"]
    assert client.hexists(KEYS.messages, handle.id) == 0
    assert handle.cancel() is False  # it has ended
    stop_worker(worker, log)


def test_a_chain_s_last_step_cancelled_while_the_first_runs_never_runs(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    """Cancelled through a handle rebuilt from the id alone (its handle record)."""
    client = server.client()
    held, noted = producer.tasks["held"], producer.tasks["noted"]
    handle = chain(held.si("l").set(task_id="l-1"), noted.s("last")).delay()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log)
    _hold(client, "l")
    rebuilt = producer.handle(handle.id)
    assert rebuilt.cancel() is True
    assert rebuilt.status() == "cancelled"
    client.set("open:l", 1)
    _wait(lambda: producer.handle("l-1").status() == "succeeded", "the first step to end")
    _assert_cancelled(handle, handle.id)
    _assert_cancelled(producer.handle(handle.id), handle.id)
    _settle(producer)
    assert _ran(client) == []
    stop_worker(worker, log)


def test_a_chain_s_middle_step_cancelled_ends_the_last_step_cancelled(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    """Cancelled with ``acancel()`` through ``app.handle`` of its explicit id (the marker
    its workflow reserved): the last step, waited for, ends naming it."""
    client = server.client()
    held, noted = producer.tasks["held"], producer.tasks["noted"]
    handle = chain(held.si("m"), noted.s("middle").set(task_id="m-2"),
                   noted.s("last")).delay()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log)
    _hold(client, "m")

    async def cancel() -> bool:
        try:
            return await producer.handle("m-2").acancel()
        finally:
            await producer.aclose()

    assert asyncio.run(cancel()) is True
    assert producer.handle("m-2").status() == "cancelled"
    client.set("open:m", 1)
    _assert_cancelled(handle, "m-2")  # the last step's get() names the middle one
    _assert_cancelled(producer.handle("m-2"), "m-2")
    _settle(producer)
    assert _ran(client) == []
    assert client.hexists(KEYS.messages, "m-2") == 0
    stop_worker(worker, log)


def test_minitask_cancel_cancels_a_step_not_sent_yet(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = server.client()
    held, noted = producer.tasks["held"], producer.tasks["noted"]
    handle = chain(held.si("x"), noted.s("cli")).delay()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log)
    _hold(client, "x")
    operate_with(producer, monkeypatch, cancel_command)
    code, out = run(capsys, "cancel", "-A", "unused:app", handle.id)
    assert (code, out) == (0, f"{handle.id}: cancelled\n")
    client.set("open:x", 1)
    _assert_cancelled(handle, handle.id)
    _settle(producer)
    assert _ran(client) == []
    stop_worker(worker, log)


def test_cancel_of_a_step_sent_or_ended_answers_as_for_any_task(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    client = server.client()
    quick, noted = producer.tasks["quick"], producer.tasks["noted"]
    later = chain(quick.si(), noted.s("later").set(task_id="s-2", delay=3600),
                  noted.s("after")).delay()
    done = chain(quick.si(), noted.s("done")).delay()
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log)
    assert done.get(timeout=DEADLINE) == 1
    _wait(lambda: producer.handle("s-2").status() == "scheduled", "the step to be sent")
    assert producer.handle("s-2").cancel() is True  # sent: withdrawn as a scheduled task
    _assert_cancelled(later, "s-2")
    assert done.cancel() is False  # ran: its value kept
    assert done.status() == "succeeded" and done.get(timeout=1) == 1
    _settle(producer)
    assert _ran(client) == ["done"]
    stop_worker(worker, log)


def test_cancel_racing_the_send_never_says_cancelled_of_a_step_that_runs(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    """Cancels while the worker sends the steps: each is either cancelled (never sent,
    or withdrawn once sent) and never runs, or it had started or ended, and runs."""
    client = server.client()
    quick, noted = producer.tasks["quick"], producer.tasks["noted"]
    log = tmp_path / "worker.log"
    worker = _worker(processes, server, log, threads=4)
    handles: List[Any] = []
    said: Dict[str, bool] = {}
    for n in range(120):  # each cancelled up to 6 ms after it is sent: some before the
        handles.append(chain(quick.si(), noted.s(f"r{n}")).delay())  # send, some after
        time.sleep(random.random() * 0.006)
        said[f"r{n}"] = handles[-1].cancel()
    ended = ("succeeded", "cancelled")
    _wait(lambda: all(handle.status() in ended for handle in handles), "every chain to end")
    # a step sent after all would hold its message until it ran
    _wait(lambda: client.hlen(KEYS.messages) == 0, "every message to go")
    ran = _ran(client)
    for n, handle in enumerate(handles):
        name = f"r{n}"
        if said[name]:
            assert name not in ran and handle.status() == "cancelled", name
        else:
            assert ran.count(name) == 1 and handle.status() == "succeeded", name
    stop_worker(worker, log)
