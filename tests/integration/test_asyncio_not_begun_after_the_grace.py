"""An attempt whose asyncio task a task's code cancels before it began begins again
(issue 29, H1), but not once the grace is over (review 18): the worker is then giving
back every lease it holds, so an attempt begun after it would run a task whose lease
was given back (a second run beside the next worker's). It goes back to its queue
instead, and its slot is freed."""
from __future__ import annotations

import threading
import time
from typing import List

import pytest

from minitask import Minitask
from minitask.worker.leases import Job
from minitask.worker.pools.coroutines import AsyncioPool

pytestmark = [pytest.mark.integration, pytest.mark.app("aiograce", on="server")]

DEADLINE = 30.0


def test_an_attempt_cancelled_before_it_began_after_the_grace_goes_back(
        app: Minitask) -> None:
    ran: List[str] = []

    @app.task(name="late")
    async def late() -> None:
        ran.append("late")

    late.delay()
    fetched = app.broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                      lease_ms=60_000, count=1, max_deliveries=5)
    [delivery] = fetched.deliveries
    job = Job("default", delivery)
    worker = app.worker(pool="asyncio")
    given: List[Job] = []
    pool = AsyncioPool(1, worker._runner, worker._outcomes, worker.hooks,
                       give_back=given.append)
    try:
        assert pool.wait_for_slot(threading.Event())
        pool._shutting_down = True  # as cancel_running sets it: the grace is over

        def begin_and_cancel() -> None:  # a task's code cancels it before its first step
            pool._start(job).cancel()

        pool._loop.call_soon_threadsafe(begin_and_cancel)
        assert pool.wait_idle(DEADLINE), "its slot was never freed"
        assert given == [job] and ran == []
    finally:
        pool.close()
