"""The asyncio pool awaits async def lifecycle hooks on its loop: worker_process_init
once before any task, task_prerun and task_postrun around each attempt with the task
context current; on a real redis-server."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, List, Tuple

import pytest

from minitask import Minitask, TaskContext, TaskFailed, Worker, current_task

pytestmark = [pytest.mark.integration, pytest.mark.app("aiohooks", on="server")]

DEADLINE = 60.0


def test_the_asyncio_pool_awaits_async_hooks_on_its_loop(app: Minitask) -> None:
    heard: List[Tuple[Any, ...]] = []

    async def init(worker: Worker) -> None:
        await asyncio.sleep(0)
        heard.append(("init", threading.current_thread().name))

    async def prerun(context: TaskContext) -> None:
        await asyncio.sleep(0)
        heard.append(("prerun", context.name, current_task() is context,
                      threading.current_thread().name))

    def postrun(context: TaskContext, status: str, outcome: Any) -> None:  # a plain one too
        shown = type(outcome).__name__ if isinstance(outcome, BaseException) else outcome
        heard.append(("postrun", context.name, current_task() is context, status, shown))

    app.on("worker_process_init", init)
    app.on("task_prerun", prerun)
    app.on("task_postrun", postrun)

    @app.task
    async def nap(x: int) -> int:
        await asyncio.sleep(0.01)
        return x

    @app.task
    def plain(x: int) -> int:
        raise ValueError(f"plain {x}")

    worker = app.worker(pool="asyncio", concurrency=4)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert nap.delay(1).get(timeout=DEADLINE) == 1
        with pytest.raises(TaskFailed):
            plain.delay(2).get(timeout=DEADLINE)
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
    loop = "minitask-asyncio"
    assert heard[0] == ("init", loop) and len(heard) == 5
    # nap's postrun may come after plain's prerun: each task's own are in order
    assert [h for h in heard if h[1] == nap.name] == [
        ("prerun", nap.name, True, loop), ("postrun", nap.name, True, "succeeded", 1)]
    assert [h for h in heard if h[1] == plain.name] == [
        ("prerun", plain.name, True, loop),
        ("postrun", plain.name, True, "failed", "ValueError")]
