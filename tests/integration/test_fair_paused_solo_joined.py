"""Fair queues: a task joining a paused solo group puts the group's first task in its
ready set first, whatever the claim's form, so that cancelling the task that joined
leaves the first one waiting (it was left in its turn's claim, which that cancel
deleted with the group's emptied set: the first task never ran, though its message
stayed). Found by random mixes of sends, pauses, cancels and fetches. Each test runs
on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Callable

import pytest

from minitask import Minitask
from minitask.admin import pause_group, queue_counts, resume_group
from tests.support.clock import ManualClock
from tests.support.fair import served, tenant_app


@pytest.mark.parametrize("form", ["plain", "with an expiry"])
def test_a_paused_solo_groups_task_outlives_a_cancel_of_the_task_that_joined_it(
        make_app: Callable[..., Minitask], clock: ManualClock, form: str) -> None:
    app, job = tenant_app(make_app)
    # a solo group: its claim ':' in groups_solo, or '/' in its turn
    if form == "plain":
        job.delay("E", 0)
    else:
        job.apply_async(("E", 0), expires=3600)
    pause_group(app, "default", "E")
    joined = job.delay("E", 1)
    assert joined.cancel()
    assert queue_counts(app, "default")["ready"] == 1
    assert served(app, clock, 2) == []  # paused
    resume_group(app, "default", "E")
    assert served(app, clock, 2) == ["E0"]
    assert queue_counts(app, "default")["ready"] == 0
