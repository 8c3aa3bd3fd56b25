"""A retry that starts while the attempt before it is still ending runs to its own
outcome. Real worker processes of tests.apps.overlapping_retry: the first attempt of
an ``async def`` task fails, its ``task_postrun`` hook holds its slot once the retry
is written, and the retry runs on the other slot meanwhile.

Before the fix, the board of running attempts (``cancel(running=True)``'s) kept one
entry per task id: the retry's entry was taken out by the first attempt's end, and a
thread-pool (or asyncio-pool) retry that started in between found no entry and was
cancelled as if asked to stop: it failed as CancelledError instead of returning
(seen once in a loaded run of test_an_exception_text_utf8_cannot_carry_..[thread])."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.fixture
def client_app(server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("overlapping", broker=server.client())
    app.task(name="aflaky", retries=1, retry_backoff=0.01)(_stand_in)
    yield app
    app.close()


async def _stand_in() -> str:  # the worker runs tests.apps.overlapping_retry's
    return ""


@pytest.mark.parametrize("pool, hook", [("thread", ""), ("asyncio", "1")])
def test_a_retry_run_while_its_first_attempt_ends_returns_its_value(
        processes: Processes, server: RedisServer, client_app: Minitask, tmp_path: Path,
        pool: str, hook: str) -> None:
    log = tmp_path / "worker.log"
    env = {"MINITASK_BROKER_URL": server.url, "TEST_HOLD": "1"}
    if hook:
        env["TEST_ASYNC_HOOK"] = hook
    worker = processes.worker("tests.apps.overlapping_retry", "--pool", pool, "-c", "2",
                              "--prefetch", "1", log=log, env=env)
    handle = client_app.tasks["aflaky"].delay()
    assert handle.get(timeout=DEADLINE) == "second attempt", log.read_text()
    assert worker.poll() is None, log.read_text()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0, log.read_text()
