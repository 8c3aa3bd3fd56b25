"""What the tests of result waits queued for a connection of a full waits' pool share:
tasks in a queue no worker serves and in one this thread serves (``unserved_and_served``,
``run_served``), each wait timed (``timed_aget``; ``timed_gets``, a thread a wait), and
the LINDEX calls the server counted (``lindex_calls``)."""
from __future__ import annotations

import threading
import time
from typing import Any, List, Tuple

import redis

from minitask import Minitask


def unserved_and_served(app: Minitask) -> Tuple[Any, Any]:
    """``never(n)`` in queue ``unserved`` (its waits run out) and ``done(n)`` in queue
    ``served``: each returns ``n``."""

    @app.task(queue="unserved")
    def never(n: int) -> int:
        return n

    @app.task(queue="served")
    def done(n: int) -> int:
        return n

    return never, done


def run_served(app: Minitask, count: int, within: float) -> None:
    """Run ``count`` tasks of queue ``served`` in this thread, in ``within`` s at most."""
    worker = app.worker(queues=["served"])
    ran, deadline = 0, time.monotonic() + within
    while ran < count:
        assert time.monotonic() < deadline, "the worker never ran the tasks"
        ran += 1 if worker.run_once() else 0


def lindex_calls(admin: "redis.Redis[bytes]") -> int:
    """The LINDEX calls the server of ``admin`` counted so far."""
    return int(admin.info("commandstats").get("cmdstat_lindex", {}).get("calls", 0))


async def timed_aget(handle: Any, timeout: float, start: float) -> Tuple[float, Any]:
    """The seconds since ``start`` at which ``handle.aget(timeout)`` ended, and what it
    returned or raised."""
    try:
        outcome = await handle.aget(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the test checks what each wait raised
        outcome = exc
    return time.monotonic() - start, outcome


def timed_gets(handles: List[Any], timeout: float,
               ended: List[Tuple[float, Any]]) -> List[threading.Thread]:
    """A started thread a handle, each adding to ``ended`` the seconds since now at which
    its ``get(timeout)`` ended, and what it returned or raised."""
    start = time.monotonic()

    def wait(handle: Any) -> None:
        try:
            outcome: Any = handle.get(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the test checks what each wait raised
            outcome = exc
        ended.append((time.monotonic() - start, outcome))

    threads = [threading.Thread(target=wait, args=(h,), daemon=True) for h in handles]
    for thread in threads:
        thread.start()
    return threads
