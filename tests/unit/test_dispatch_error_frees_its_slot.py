"""An unexpected error of the dispatcher's fetch (probe 17: a RecursionError from a
planted schedule record) stops the worker: the slot it had taken for the fetch was
never given back, so the shutdown waited its whole grace for a task that was not
running. The slot is now given back and the worker stops at once, saying why."""
from __future__ import annotations

import threading
from typing import Callable, List

import pytest

from minitask import Minitask

#: A bound, not a timing: the stop takes well under a second; the grace is 600 s.
DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_fetch_that_raises_stops_the_worker_without_waiting_its_grace(
        make_app: Callable[..., Minitask], pool: str) -> None:
    app = make_app()
    worker = app.worker(pool=pool, concurrency=2, grace=600.0)

    def broken() -> None:
        raise RuntimeError("a bug of the fetch")

    worker.fetch = broken  # type: ignore[method-assign]
    raised: List[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # the worker's own stop, as it ends
            raised.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(DEADLINE)
    assert not runner.is_alive(), "the worker waited its grace for a slot it had taken"
    assert raised and "a bug of the fetch" in str(raised[0])
