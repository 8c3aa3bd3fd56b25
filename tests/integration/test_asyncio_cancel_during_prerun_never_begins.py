"""A ``cancel(running=True)`` that comes while an attempt's ``task_prerun`` hooks run, on
the asyncio pool: the attempt's code never begins, and it ends cancelled (a reviewer's
finding on issue 36: on Python 3.12+ the pool starts a coroutine eagerly, so its first
step, here its whole body, ran before the cancel reached it; before 3.12 its
coroutine was cancelled before its first step, never awaited: a RuntimeWarning). A
plain function ran whole too. On a real redis-server (the cancel watch blocks on a
stream)."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import pytest

from minitask import Minitask, TaskContext, TaskFailed

pytestmark = [pytest.mark.integration, pytest.mark.app("aioprerun", on="server")]

DEADLINE = 30.0


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_a_cancel_during_task_prerun_keeps_the_code_from_beginning(
        app: Minitask, kind: str) -> None:
    ran: List[str] = []

    async def prerun(context: TaskContext) -> None:
        handle = app.handle(context.id)
        assert await asyncio.to_thread(handle.cancel, running=True) is True
        deadline = time.monotonic() + DEADLINE
        while not context.cancel_requested and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # the worker's cancel watch hears it
        assert context.cancel_requested

    app.on("task_prerun", prerun)

    if kind == "async":
        @app.task(name="body")
        async def body() -> str:  # no await: its whole body is its first step
            ran.append("body")
            return "ran"
    else:
        @app.task(name="body")
        def body() -> str:
            ran.append("body")
            return "ran"

    handle = body.delay()
    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)
        assert handle.status() == "cancelled", failed.value
        assert ran == []
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive()
