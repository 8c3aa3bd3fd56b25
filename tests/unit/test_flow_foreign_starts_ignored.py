"""A rate limiter's log of starts holding entries dated far ahead (data minitask did
not write) is cleaned at the next start: the limiter's tasks run at its rate, not when
the planted dates come (probe 15: five starts ten years ahead parked a 5/s task for ten
years, the key having no expiry)."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys

TEN_YEARS_MS = 10 * 365 * 86_400_000


@pytest.mark.parametrize("planted", [5, 2], ids=["as-many-as-the-rate", "fewer"])
def test_starts_dated_far_ahead_are_removed_and_the_task_runs(
        make_app: Callable[..., Minitask], planted: int) -> None:
    app = make_app()

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    starts = queue_keys(app.name, "default").flow_prefix + "7:limited:starts"
    client = app.broker.client
    ahead = time.time() * 1000 + TEN_YEARS_MS
    client.zadd(starts, {f"planted{n}": ahead + n for n in range(planted)})
    handle = limited.delay(7)
    worker = app.worker()
    assert worker.run_once()
    assert handle.get(timeout=1) == 7
    state = app.broker.flow.limiter_state("default", "7:limited")
    assert state["parked"] == 0 and state["due_ms"] is None
    # none is left to count against the rate (fewer than the rate would have cut it
    # for as long as starts kept the key alive)
    members = [member for member, _ in client.zrange(starts, 0, -1, withscores=True)]
    assert not [member for member in members if member.startswith(b"planted")]
