"""A worker's cancel watch reads where the cancel streams end before the worker leases
its first task, so that a stop asked of any task it runs is heard (real redis-server).

The watch hears only the requests posted after its first look. It used to look from a
thread of its own while the worker already served: on a loaded machine (make
test-redis on 6.2) a task started and was asked to stop before that thread looked, and
the request, behind the watch's starting point, was never heard; the task ran on to
its end (test_async_pool's cancel test, 5 s out of 5). Here the first look is held
until the stop was asked (bounded), as a starved thread's came.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, Iterator, Optional

import pytest

from minitask import Minitask, TaskFailed, current_task
from minitask.stores.cancels import CancelStore
from minitask.worker import cancels

pytestmark = [pytest.mark.integration, pytest.mark.app("watchfirst", on="server")]

DEADLINE = 60.0
#: Longest the watch's first look is held back, waiting for the stop to be asked.
HELD = 3.0
#: How long the task waits to hear its stop before it gives up and returns.
TASK_WAITS = 15.0


@pytest.fixture
def late_first_look(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The watch's first look at the streams waits (up to HELD s) for the event the
    test sets once it asked the stop; the worker's start may wait for it longer."""
    asked = threading.Event()
    looks: Dict[str, int] = {"count": 0}
    real = CancelStore.positions

    def late(self: CancelStore, queues: Any, seen: Optional[Dict[str, str]] = None) -> Any:
        looks["count"] += 1
        if looks["count"] == 1:
            asked.wait(HELD)
        return real(self, queues, seen)

    monkeypatch.setattr(CancelStore, "positions", late)
    monkeypatch.setattr(cancels, "FIRST_LOOK_WAIT", DEADLINE, raising=False)
    yield asked


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_stop_asked_as_soon_as_the_task_started_is_heard(
        app: Minitask, late_first_look: threading.Event, pool: str) -> None:
    started = threading.Event()

    @app.task
    def polite() -> str:
        context = current_task()
        assert context is not None
        started.set()
        deadline = time.monotonic() + TASK_WAITS
        while not context.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        return "noticed" if context.cancel_requested else "never told"

    @app.task
    async def apolite() -> str:
        started.set()
        await asyncio.sleep(TASK_WAITS)  # cancelled by the stop
        return "never told"

    handle = (polite if pool == "thread" else apolite).delay()
    worker = app.worker(pool=pool, concurrency=2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert started.wait(DEADLINE), "the task never started"
        assert handle.cancel(running=True) is True
        late_first_look.set()
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)  # it returned "never told": the stop went unheard
        assert failed.value.exc_type == "Cancelled"
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
