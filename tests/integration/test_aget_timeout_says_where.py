"""``aget()`` and ``get()`` say the same thing when their wait runs out: where the task
is (scheduled and when, retrying, queued with or without a live worker, running),
read the same way; checked twin against twin in each state, on a real redis-server."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import pytest

from minitask import Minitask, ResultTimeout
from tests.support.draining import drain
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app("twins", on="server")]

#: Bounds the one task that is held running.
HELD = 30.0


def _messages(app: Minitask, handle: Any) -> List[str]:
    """get()'s and aget()'s ResultTimeout messages, with the task's id made neutral."""
    said = []
    with pytest.raises(ResultTimeout) as caught:
        handle.get(timeout=0.05)
    said.append(str(caught.value).replace(handle.id, "ID"))

    async def wait() -> None:
        try:
            await handle.aget(timeout=0.05)
        finally:
            await app.aclose()

    with pytest.raises(ResultTimeout) as caught:
        asyncio.run(wait())
    said.append(str(caught.value).replace(handle.id, "ID"))
    return said


def _beat(app: Minitask, name: str, queues: str) -> None:
    now_ms = int(time.time() * 1000)
    app.broker.registry.heartbeat(name, {"queues": queues, "beat_ms": now_ms}, now_ms,
                                  ttl_ms=60_000)


def test_scheduled_retrying_and_queued_are_told_alike(app: Minitask) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(retries=3, retry_backoff=600)
    def flaky() -> None:
        raise OSError("down")

    retrying = flaky.delay()
    drain(app.worker(burst=True))
    _beat(app, "web1.1.abc", "busy")
    cases = {
        "scheduled": (add.apply_async([1, 2], delay=600), "it is scheduled (next run due at "),
        "retrying": (retrying, "it is retrying"),
        "queued, nobody serves": (add.apply_async([1, 2], queue="idle"),
                                  "no live worker serves queue 'idle'"),
        "queued, served": (add.apply_async([1, 2], queue="busy"),
                           "1 live worker(s) serve queue 'busy' (web1.1.abc)"),
    }
    for label, (handle, says) in cases.items():
        sync, async_ = _messages(app, handle)
        assert says in sync, label
        assert async_ == sync, label


def test_running_is_told_alike(app: Minitask) -> None:
    release = threading.Event()

    @app.task
    def held() -> None:
        release.wait(HELD)

    handle = held.delay()
    worker = app.worker(burst=True)
    thread = threading.Thread(target=worker.run_once, daemon=True)
    thread.start()
    try:
        wait_until(lambda: handle.status() == "running", timeout=HELD, message="the task to run")
        sync, async_ = _messages(app, handle)
        assert "it is still running" in sync
        assert async_ == sync
    finally:
        release.set()
        thread.join(timeout=HELD)
    assert not thread.is_alive()
