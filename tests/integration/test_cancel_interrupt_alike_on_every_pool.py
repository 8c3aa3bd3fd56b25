"""A task that raises ``KeyboardInterrupt`` while ``cancel(running=True)`` stops it (an
``async def`` one on its ``CancelledError``, a plain one once ``cancel_requested`` says
so) ends the same on every pool: ``cancelled``, its KeyboardInterrupt recorded nowhere
as a failure, nothing dead-lettered, and the pool runs on."""
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


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.cancel_interrupts as interrupts
    app = Minitask("cancelki", broker=server.client())
    for task in interrupts.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries)(task.func)
    yield app
    app.close()


@pytest.mark.parametrize("pool", ["asyncio", "thread", "process"])
@pytest.mark.parametrize("name", ["a_cancel_ki", "s_cancel_ki"])
def test_a_keyboard_interrupt_raised_while_cancelled_ends_cancelled_on_every_pool(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str, name: str,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.cancel_interrupts", "--pool", pool, "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    handle = producer.tasks[name].delay()
    wait_until(lambda: handle.status() == "running", timeout=DEADLINE,
               message=f"{name} running")
    handle.cancel(running=True)
    wait_until(lambda: handle.status() not in ("running", "pending"), timeout=DEADLINE,
               message=f"{name} ended")
    text = log.read_text(errors="replace")
    assert handle.status() == "cancelled", text
    assert producer.dead_letters() == [], text
    assert producer.tasks["double"].delay(4).get(timeout=DEADLINE) == 8, "the pool runs on"
    assert handle.status() == "cancelled"
    assert worker.poll() is None, text  # still serving
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text(errors="replace")
