"""A task's function replaced while an asyncio-pool worker runs (as a test's
``mock.patch.object(task, "func", ...)`` does) is called as what it is now: the pool's
note of which functions are ``async def`` follows the function, not the task's name."""
from __future__ import annotations

import threading
from typing import Callable

from minitask import Minitask
from tests.support.servers import RedisServer


def test_a_replaced_function_runs_as_what_it_is_now(
        start_redis: Callable[..., RedisServer]) -> None:
    server = start_redis()
    app = Minitask("replaced", broker=server.url)

    @app.task(name="job")
    async def job() -> str:
        return "async"

    async def other_async() -> str:
        return "async again"

    def plain() -> str:
        return "plain"

    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert job.delay().get(timeout=30) == "async"
        job.func = plain  # type: ignore[assignment]
        assert job.delay().get(timeout=30) == "plain"
        job.func = other_async  # type: ignore[assignment]
        assert job.delay().get(timeout=30) == "async again"
    finally:
        worker.stop()
        thread.join(timeout=30)
        app.close()
    assert not thread.is_alive()
