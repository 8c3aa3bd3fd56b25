"""A BaseException raised on the asyncio pool's loop by code outside the task's own (an
argument type's decode function) dead-letters that task; the loop runs on, and the
tasks after it run. It ended the loop's thread: every later task waited, leased, for
ever (the heartbeat renewed its lease)."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from minitask import Minitask, TaskFailed

pytestmark = [pytest.mark.integration, pytest.mark.app("baseexc", on="server")]

DEADLINE = 60.0


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_a_decode_function_raising_a_base_exception_dead_letters_only_its_task(
        app: Minitask, raised: type) -> None:
    def decode(data: bytes) -> Any:
        raise raised("raised by a decode function")

    app.register_type(Point, 40, lambda point: str(point.x).encode(), decode)

    @app.task
    async def takes(point: Any) -> int:
        return 1

    @app.task
    async def plain(x: int) -> int:
        return x + 1

    bad, good = takes.delay(Point(1)), plain.delay(1)
    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        with pytest.raises(TaskFailed) as failed:
            bad.get(timeout=DEADLINE)
        assert failed.value.exc_type == raised.__name__
        assert good.get(timeout=DEADLINE) == 2, "the loop ran on"
        assert plain.delay(2).get(timeout=DEADLINE) == 3
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
