"""An app whose results live two seconds, for the test that nothing is left behind
once they expire (tests/integration/test_results_expire_redis.py); the broker comes
from MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import List

import tests.apps.ops as ops
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


@app.task(name="exp.square", queue="other")
def square(x: int) -> int:
    """The chord's members (none but they run it: the test counts their outcomes)."""
    return x * x


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


#: Runs a minute unless stopped (the thread pool asks it: ``cancel_requested``); takes
#: a key, under which it marks its start (``marks:started:<key>``).
long = app.task(name="exp.long")(ops.long.func)
