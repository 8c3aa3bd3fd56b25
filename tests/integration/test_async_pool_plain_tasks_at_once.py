"""On the asyncio pool, plain ``def`` tasks run ``-c`` at once, as ``async def`` ones
do: the pool's own executor has a thread for each slot. It had the executor's
default, ``min(32, cores + 4)`` threads, so that on a 2-core machine the seventh
plain task waited for a thread (and that wait counted against its time limit)."""
from __future__ import annotations

import threading
from typing import Callable

from minitask import Minitask
from tests.support.servers import RedisServer

AT_ONCE = 40  # past the executor's default on any machine (at most 32)


def test_plain_tasks_run_as_many_at_once_as_the_pool_has_slots(
        start_redis: Callable[..., RedisServer]) -> None:
    server = start_redis()
    app = Minitask("plain-at-once", broker=server.url)
    together = threading.Barrier(AT_ONCE, timeout=30)

    @app.task(name="meet")
    def meet(n: int) -> int:
        together.wait()  # broken (BrokenBarrierError) unless all run at once
        return n

    worker = app.worker(pool="asyncio", concurrency=AT_ONCE)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        handles = [meet.delay(n) for n in range(AT_ONCE)]
        assert [handle.get(timeout=60) for handle in handles] == list(range(AT_ONCE))
    finally:
        together.abort()
        worker.stop()
        thread.join(timeout=30)
        app.close()
    assert not thread.is_alive()
