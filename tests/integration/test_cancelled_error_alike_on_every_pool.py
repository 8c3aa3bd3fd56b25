"""An ``asyncio.CancelledError`` a task raises itself (nothing cancelled it) is that
attempt's failure, recorded as CancelledError, on every pool: the asyncio pool
recorded it as "RuntimeError: ...cancelled by something other than minitask"."""
from __future__ import annotations

import asyncio
import threading
from typing import Dict

import pytest

from minitask import Minitask, TaskFailed

pytestmark = [pytest.mark.integration, pytest.mark.app("cancelled", on="server")]

DEADLINE = 60.0


def _outcomes(app: Minitask, pool: str) -> Dict[str, TaskFailed]:
    @app.task(name="plain")
    def plain() -> None:
        raise asyncio.CancelledError("given up by the task itself")

    @app.task(name="coroutine")
    async def coroutine() -> None:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("given up by the task itself")

    @app.task(name="timed", timeout=30)  # awaited in a task of its own (the limit's)
    async def timed() -> None:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("given up by the task itself")

    @app.task(name="awaited")  # a future someone else cancelled: raised in the task
    async def awaited() -> None:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    handles = {name: app.tasks[name].delay() for name in ("plain", "coroutine", "timed",
                                                          "awaited")
               if pool == "asyncio" or name == "plain"}
    worker = app.worker(pool=pool, concurrency=2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    failed: Dict[str, TaskFailed] = {}
    try:
        for name, handle in handles.items():
            with pytest.raises(TaskFailed) as raised:
                handle.get(timeout=DEADLINE)
            failed[name] = raised.value
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
    return failed


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_cancelled_error_the_task_raises_is_recorded_as_cancelled_error(
        app: Minitask, pool: str) -> None:
    failed = _outcomes(app, pool)
    for name, error in failed.items():
        assert error.exc_type == "CancelledError", (name, error.exc_type, error.message)
    for name in ("plain", "coroutine", "timed"):
        if name in failed:
            assert failed[name].message == "given up by the task itself"
    assert {dead.task_id for dead in app.dead_letters()} == {
        error.task_id for error in failed.values()}
    assert app.broker.queues.counts("default")["running"] == 0
