"""Fair queues: fetch.lua's fast path for solo groups of tasks without limits, and
its hand-over to flow.lua's serve() within one fetch (issue 35).

A fetch serves the tokens of solo groups whose task has no limits itself, and
any other token through the fair library, which then serves every token left in
that call, the fast path's removals written first. These tests mix both in one
fetch of ten: each task is served once, in the rotation's order, the counts stay
right and emptied groups leave nothing. Each runs on fakeredis and on the suite's
own redis-server.
"""
from __future__ import annotations

from typing import Callable

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.fair import group_keys, served, tenant_app

KEYS = QueueKeys("test", "default")


def test_one_fetch_serves_solo_groups_then_a_set_form_group_then_solo_ones_again(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("S1", 0)
    job.delay("S2", 0)
    job.delay("B", 0)
    job.delay("B", 1)  # B in its set form: its token goes to serve()
    job.delay("S3", 0)  # after B's token: served by serve() in the same fetch
    assert queue_counts(app, "default")["ready"] == 5
    assert served(app, clock, 1, count=10) == ["S10", "S20", "B0", "S30", "B1"]
    assert queue_counts(app, "default")["ready"] == 0
    assert group_keys(client) == []
    job.delay("S1", 1)  # each group starts afresh, solo again
    job.delay("S2", 1)
    assert served(app, clock, 1, count=10) == ["S11", "S21"]
    assert group_keys(client) == []


def test_a_paused_group_sends_a_fetch_of_solo_groups_to_serve_and_is_skipped(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    for group in ("S1", "P", "S2"):
        job.delay(group, 0)
    app.pause_group("default", "P")
    assert served(app, clock, 1, count=10) == ["S10", "S20"]
    assert queue_counts(app, "default")["ready"] == 1  # P0 waits in its group's set
    app.resume_group("default", "P")
    assert served(app, clock, 1, count=10) == ["P0"]
    assert group_keys(client) == []


def test_a_solo_group_whose_task_expires_is_served_by_serve_after_fast_ones(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("S1", 0)
    job.apply_async(("L", 0), expires=3600)  # a spec with an expiry
    job.delay("S2", 0)
    assert served(app, clock, 1, count=10) == ["S10", "L0", "S20"]
    assert queue_counts(app, "default")["ready"] == 0
    assert group_keys(client) == []
