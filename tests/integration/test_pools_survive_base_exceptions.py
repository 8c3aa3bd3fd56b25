"""A BaseException raised by code outside the task's own (an argument type's decode
function) dead-letters that task, and the pool runs on. On the asyncio pool it ended
the loop's thread: every later task waited, leased, for ever; on the thread pool the
task itself stayed leased for ever (the heartbeat renewed its lease)."""
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


@pytest.mark.parametrize("pool", ["asyncio", "thread"])
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_a_decode_function_raising_a_base_exception_dead_letters_only_its_task(
        app: Minitask, raised: type, pool: str) -> None:
    def decode(data: bytes) -> Any:
        raise raised("raised by a decode function")

    app.register_type(Point, 40, lambda point: str(point.x).encode(), decode)

    if pool == "asyncio":
        @app.task
        async def takes(point: Any) -> int:
            return 1

        @app.task
        async def plain(x: int) -> int:
            return x + 1
    else:
        @app.task
        def takes(point: Any) -> int:
            return 1

        @app.task
        def plain(x: int) -> int:
            return x + 1

    bad, good = takes.delay(Point(1)), plain.delay(1)
    worker = app.worker(pool=pool, concurrency=1)
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
