"""Fair queues: a solo group of a plain task is one field of the queue's ``groups_solo``
(its claim), and its token in a ready list, which counts its task (issue 35: 100,000
groups of one task each at the ungrouped rate). No turn, no ``groups`` entry, no
``cancelled`` entry, no ``groups_ready`` count: a fetch of it removes one hash field.
These tests pin that form and that every count and operator view stays exact through
its transitions. Each test runs on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Callable

from minitask import Minitask
from minitask.admin import group_counts, pause_group, purge_ready, queue_counts, resume_group
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.fair import group_keys, served, tenant_app

KEYS = QueueKeys("test", "default")


def test_a_plain_solo_group_is_one_field_of_groups_solo_and_its_fetch_removes_it(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay_many([(f"T{n}", n) for n in range(10)])
    assert group_keys(client) == [KEYS.groups_solo]
    assert client.hlen(KEYS.groups_solo) == 10
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"], counts["groups"]) == (10, 10, 10)
    assert counts["ready_by_priority"] == {"5": 10}  # their tokens, in their list
    assert [backlog for _, backlog in counts["largest_groups"]] == [1] * 5
    assert sorted(served(app, clock, 10)) == sorted(f"T{n}{n}" for n in range(10))
    assert group_keys(client) == []
    assert queue_counts(app, "default")["ready"] == 0


def test_counts_stay_exact_as_a_solo_group_takes_its_set_form_and_back(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    first = job.delay("A", 0)
    job.delay("B", 0)

    def shown() -> tuple:
        counts = queue_counts(app, "default")
        return counts["ready"], counts.get("grouped", 0), counts.get("groups", 0)

    assert shown() == (2, 2, 2)
    job.delay("A", 1)  # joins A: its first task goes to A's set, ordered first
    assert client.hkeys(KEYS.groups_solo) == [b"B"]
    assert shown() == (3, 3, 2)
    assert group_counts(app, ["default"])["default"]["largest_groups"] == [("A", 2), ("B", 1)]
    assert first.cancel()
    assert shown() == (2, 2, 2)
    assert served(app, clock, 4) == ["A1", "B0"]
    assert shown() == (0, 0, 0)
    assert group_keys(client) == []


def test_a_cancelled_solo_task_is_counted_out_at_once(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    doomed = job.delay("A", 0)
    assert doomed.cancel()
    assert queue_counts(app, "default")["ready"] == 0  # its token counted out
    assert client.hlen(KEYS.groups_solo) == 0
    assert served(app, clock, 2) == []
    assert group_keys(client) == []


def test_a_paused_solo_group_shows_its_task_and_holds_it_until_resumed(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    job.delay("B", 0)
    pause_group(app, "default", "A")
    counts = queue_counts(app, "default")
    assert counts["paused_shown"] == [("A", 1)] and counts["ready"] == 2
    assert served(app, clock, 4) == ["B0"]
    counts = queue_counts(app, "default")
    assert counts["paused_shown"] == [("A", 1)] and counts["ready"] == 1
    resume_group(app, "default", "A")
    assert served(app, clock, 2) == ["A0"]
    assert [k for k in group_keys(client) if not k.endswith("groups_paused")] == []


def test_purge_deletes_solo_groups_tasks_and_claims(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, ignore_result=True)
    client = app.broker.transport.client
    job.delay_many([(f"T{n}", 0) for n in range(5)])
    assert purge_ready(app, "default") == 5
    assert group_keys(client) == []
    assert queue_counts(app, "default")["ready"] == 0
    job.delay("T0", 7)  # a group purged takes a new task as any new group
    assert served(app, clock, 2) == ["T07"]


def test_a_groups_solo_of_another_type_strands_no_task_and_is_moved_aside_by_a_send(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay_many([("A", 0), ("B", 0)])
    client.delete(KEYS.groups_solo)
    client.set(KEYS.groups_solo, "not minitask's")  # data minitask did not write
    job.delay("C", 0)  # the key is moved aside (kept for its owner), the send goes on
    assert client.get(f"{KEYS.groups_solo}:foreign") == b"not minitask's"
    assert sorted(served(app, clock, 6)) == ["A0", "B0", "C0"]  # each once
