"""Cancelling grouped ready tasks (fair queues, issue 35; probe 9's M5): the task
leaves its group in the cancel's own step, so status, ``group_counts_many`` and
``/metrics`` never count it as ready, paused group or not, and a group left with
no ready task leaves no key behind.

Every test runs on fakeredis and on the suite's own redis-server (``make_app``).
"""
from __future__ import annotations

from typing import Callable, List

import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.fair import served, tenant_app

KEYS = QueueKeys("test", "default")


def _group_keys(client: "redis.Redis[bytes]") -> List[str]:
    """The queue's group keys and counts (the operators' pauses and weights aside)."""
    kept = (KEYS.groups_paused, KEYS.groups_weight)
    return sorted(key.decode() for key in client.keys("*")
                  if (b":g:" in key or b"flow:groups" in key) and key.decode() not in kept)


def _cancelled_ids(client: "redis.Redis[bytes]") -> List[bytes]:
    """The ids in cancelled (a group's token, byte 255 first, is no id)."""
    return [member for member in client.zrange(KEYS.cancelled, 0, -1)
            if not member.startswith(b"\xff")]


def test_cancelling_every_task_of_a_paused_group_counts_none_and_leaves_no_key(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    app.pause_group("default", "P")
    handles = [job.delay("P", n) for n in range(3)]
    assert [handle.cancel() for handle in handles] == [True, True, True]
    assert [handle.status() for handle in handles] == ["cancelled"] * 3
    counts = queue_counts(app, "default")
    assert counts["ready"] == 0 and "grouped" not in counts, counts
    assert app.broker.flow.group_counts_many(["default"]) == {}
    assert _group_keys(client) == []
    assert _cancelled_ids(client) == []
    # the pause is the operator's: it stays, and a worker finds nothing to run
    assert client.smembers(KEYS.groups_paused) == {b"P"}
    assert drain(app.worker(burst=True)) == 0
    assert app.resume_group("default", "P") is True
    assert drain(app.worker(burst=True)) == 0
    assert _group_keys(client) == []


def test_cancelling_two_of_three_tasks_of_a_live_group_leaves_one_ready(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    handles = [job.delay("A", n) for n in range(3)]
    job.delay_many([("B", n) for n in range(2)])
    assert handles[0].cancel() and handles[2].cancel()
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"], counts["groups"]) == (3, 3, 2), counts
    assert counts["largest_groups"] == [("B", 2), ("A", 1)]
    assert _cancelled_ids(client) == []
    # the group keeps its place and order: its one task left, in turns with B
    assert served(app, clock, 4) == ["A1", "B0", "B1"]
    assert queue_counts(app, "default")["ready"] == 0
    assert _group_keys(client) == []


def test_cancelling_a_solo_groups_task_before_any_fetch_counts_it_no_more(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    gone = job.delay("A", 0)  # a group of one: its task held in its token
    job.delay("B", 0)
    assert gone.cancel() is True
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"], counts["largest_groups"]) == \
        (1, 1, [("B", 1)]), counts
    assert [key for key in _group_keys(client) if ":g:A:" in key] == []
    assert served(app, clock, 3) == ["B0"]
    job.delay("A", 1)  # the group starts afresh
    assert served(app, clock, 2) == ["A1"]


def test_a_cancel_in_a_group_of_several_priorities_keeps_the_others_order(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    low = job.apply_async(("A", 0), priority=2)
    job.apply_async(("A", 1), priority=2)
    urgent = job.apply_async(("A", 2), priority=9)
    job.apply_async(("A", 3), priority=9)
    assert urgent.cancel() and low.cancel()
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"]) == (2, 2), counts
    assert counts["ready_by_priority"] == {}  # nothing of the group left out of a list
    assert served(app, clock, 3) == ["A3", "A1"]
    assert _group_keys(client) == [] and _cancelled_ids(client) == []
