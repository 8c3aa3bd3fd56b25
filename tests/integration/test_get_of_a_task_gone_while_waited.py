"""A wait for a task that becomes unknown while it is waited for (an ``ignore_result``
task that ends, keeping no result; a task purged or forgotten meanwhile) has nothing
left to wait for: ``get()`` and ``aget()`` raise ``ResultTimeout`` saying it is unknown
within a wait's turn (5 s at most), as they do at once for an id unknown before the
wait. They checked only before waiting: ``get()`` with no timeout waited for ever
(today's probe). On the suite's own redis-server; the worker runs in this process."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List, Optional

import pytest

from minitask import Minitask, ResultTimeout
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Bounds each wait of the test (the turn a wait checks in is 5 s at most).
DEADLINE = 30.0


def _app(redis_server: RedisServer) -> Minitask:
    app = Minitask("gonewaits", broker=redis_server.url)

    @app.task(name="quiet", ignore_result=True)
    def quiet(x: int) -> int:
        return x

    return app


def _waited(wait: Any) -> List[Any]:
    """``wait()`` run in a thread; the list gets what it raised or returned."""
    ended: List[Any] = []

    def run() -> None:
        try:
            ended.append(wait())
        except Exception as exc:  # noqa: BLE001 - the test checks what it raised
            ended.append(exc)

    threading.Thread(target=run, daemon=True).start()
    return ended


def _ended(ended: List[Any], app: Minitask) -> Optional[Any]:
    worker = app.worker(queues=["default"])
    deadline = time.monotonic() + DEADLINE
    ran = False
    while not ended:
        assert time.monotonic() < deadline, "the wait never ended"
        ran = ran or bool(worker.run_once())
        time.sleep(0.01)
    assert ran, "the task never ran"
    return ended[0]


@pytest.mark.parametrize("timeout", [None, 25.0])
def test_get_of_an_ignore_result_task_that_ends_raises_unknown(
        redis_server: RedisServer, timeout: Optional[float]) -> None:
    app = _app(redis_server)
    try:
        handle = app.tasks["quiet"].delay(1)
        began = time.monotonic()
        ended = _waited(lambda: handle.get(timeout=timeout))
        time.sleep(0.2)  # waiting by now
        outcome = _ended(ended, app)
        assert isinstance(outcome, ResultTimeout), outcome
        assert "is unknown" in str(outcome), outcome
        assert time.monotonic() - began < 15.0
    finally:
        app.close()


def test_aget_of_an_ignore_result_task_that_ends_raises_unknown(
        redis_server: RedisServer) -> None:
    app = _app(redis_server)
    try:
        handle = app.tasks["quiet"].delay(2)

        async def wait() -> Any:
            try:
                return await handle.aget()
            finally:
                await app.aclose()  # this loop's clients, closed on it

        ended = _waited(lambda: asyncio.run(wait()))
        time.sleep(0.2)
        outcome = _ended(ended, app)
        assert isinstance(outcome, ResultTimeout), outcome
        assert "is unknown" in str(outcome), outcome
    finally:
        app.close()
