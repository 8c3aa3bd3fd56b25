"""An app whose results live two seconds, for the test that nothing is left behind
once they expire (tests/integration/test_results_expire_redis.py); the broker comes
from MINITASK_BROKER_URL."""
from __future__ import annotations

import time
from typing import List

from minitask import Minitask, Retry, current_task

#: Seconds every result (and what lives as long: progress, workflow records) is kept.
RESULT_TTL = 2.0

app = Minitask("expiring", result_ttl=RESULT_TTL)


@app.task(name="exp.add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="exp.mul", queue="other")
def mul(x: int, y: int) -> int:
    return x * y


@app.task(name="exp.total")
def total(values: List[int]) -> int:
    return sum(values)


@app.task(name="exp.boom", retries=0)
def boom() -> None:
    raise ValueError("boom")


@app.task(name="exp.again", retries=2, retry_backoff=0.01)
def again() -> str:
    """Asks for one retry, then succeeds."""
    context = current_task()
    assert context is not None
    if context.attempt == 1:
        raise Retry(delay=0)
    return "second"


@app.task(name="exp.stepped")
def stepped(total: int) -> int:
    context = current_task()
    assert context is not None
    for done in range(1, total + 1):
        context.set_progress(done, total, f"step {done}")
    return total


@app.task(name="exp.long")
def long() -> str:
    """Runs a minute unless stopped (the thread pool asks it: ``cancel_requested``)."""
    context = current_task()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if context is not None and context.cancel_requested:
            return "stopped"
        time.sleep(0.05)
    return "ran"
