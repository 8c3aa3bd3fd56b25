"""Fair queues: a solo group, whose one ready task is held in its token (guide/fair-queues).

A task sent to a group with neither a ready set nor a turn is held in its group's
token and claim, not in a ready set (a plain task's claim in the queue's
``groups_solo`` only: no turn, no ``groups`` entry, no ``cancelled`` entry). These
tests follow the form through its transitions (one task, two, one, none), a pause,
the group's limits, a delay, a retry, a cancel and a purge: the group's order and
place in the rotation are kept, and an empty group leaves nothing behind. Each test
runs on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Callable, List

import redis

from minitask import Minitask, TaskFailed
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.fair import group_keys, served, tenant_app

KEYS = QueueKeys("test", "default")


def _claim(client: "redis.Redis[bytes]", group: str) -> str:
    """A solo group's claim (groups_solo: a plain task's), or its turn's."""
    return (client.hget(KEYS.groups_solo, group)
            or client.hget(KEYS.fair_group(group, "turn"), "tok") or b"").decode()


def test_a_groups_one_task_is_held_in_its_token_with_no_ready_set(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    handle = job.delay("A", 0)
    assert not client.exists(KEYS.fair_group("A", "ready"))
    # its one key: no turn, no groups entry, no cancelled entry for its token
    assert group_keys(client) == [KEYS.groups_solo]
    # the claim: a generation, then ':' (its spec is plain: lib.lua's
    # PLAIN_SOLO_CLAIM), the task's priority's digit and its id
    assert _claim(client, "A").endswith(f":5{handle.id}")
    assert queue_counts(app, "default")["ready"] == 1
    assert served(app, clock, 2) == ["A0"]
    assert group_keys(client) == []


def test_one_task_then_two_then_one_then_none(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    job.delay("A", 1)  # the group's set is made: the first task goes there, first
    assert client.zcard(KEYS.fair_group("A", "ready")) == 2
    assert _claim(client, "A").startswith("+")  # the same token, live, in its set form
    assert served(app, clock, 1) == ["A0"]
    assert client.zcard(KEYS.fair_group("A", "ready")) == 1
    assert queue_counts(app, "default")["ready"] == 1
    assert served(app, clock, 1) == ["A1"]
    assert group_keys(client) == []
    job.delay("A", 2)  # the group starts afresh, solo again
    assert not client.exists(KEYS.fair_group("A", "ready"))
    assert served(app, clock, 2) == ["A2"]
    assert group_keys(client) == []


def test_a_solo_group_keeps_its_place_in_the_rotation_when_a_second_task_joins(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    for tenant in "ABC":
        job.delay(tenant, 0)
    job.delay("A", 1)
    assert served(app, clock, 5) == ["A0", "B0", "C0", "A1"]


def test_a_higher_priority_task_joining_a_solo_group_goes_first(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay("A", 0)
    job.delay("B", 0)
    job.apply_async(("A", 1), priority=9)
    assert served(app, clock, 4) == ["A1", "B0", "A0"]


def test_a_solo_group_paused_keeps_its_task_until_resumed(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    job.delay("B", 0)
    app.pause_group("default", "A")
    assert served(app, clock, 3) == ["B0"]
    assert queue_counts(app, "default")["ready"] == 1  # A0 waits in its group's set
    job.delay("A", 1)  # joins the paused group behind A0
    assert served(app, clock, 2) == []
    app.resume_group("default", "A")
    assert served(app, clock, 3) == ["A0", "A1"]
    assert group_keys(client) == []


def test_a_solo_group_resumed_before_its_token_is_met_is_served_once(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    app.pause_group("default", "A")
    app.resume_group("default", "A")
    assert served(app, clock, 3) == ["A0"]
    assert group_keys(client) == []


def test_a_solo_task_at_its_groups_limit_waits_and_comes_back_when_a_slot_frees(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    client = app.broker.transport.client
    job.delay("A", 0)
    first = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                    count=1, max_deliveries=5)
    (delivery,) = first.deliveries
    job.delay("A", 1)  # the group was emptied: A1 is solo, and A0 holds the slot
    assert served(app, clock, 2) == []
    assert client.zcard(KEYS.fair_group("A", "ready")) == 1  # A1 waits in its set
    app.broker.results.ack("default", delivery.task_id, None, 0)
    assert served(app, clock, 2) == ["A1"]


def test_a_solo_group_over_its_rate_comes_back_when_due(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_rate_limit="1/s")
    job.delay("A", 0)
    assert served(app, clock, 1) == ["A0"]
    job.delay("A", 1)  # solo again; the group's rate holds it
    result = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                     count=1, max_deliveries=5)
    assert result.deliveries == [] and result.next_event_ms is not None
    clock.ms = result.next_event_ms
    assert served(app, clock, 2) == ["A1"]


def test_a_delayed_task_of_an_empty_group_joins_it_when_due(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.apply_async(("A", 0), delay=5)
    assert served(app, clock, 1) == []
    clock.advance(5)
    assert served(app, clock, 2) == ["A0"]
    assert group_keys(client) == []


def test_a_solo_task_retried_runs_again_and_leaves_nothing_behind(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(group_by="tenant", group_max_running=1, retries=2, retry_backoff=1.0,
              name="job")
    def job(tenant: str, n: int) -> int:
        ran.append(n)
        if len(ran) == 1:
            raise RuntimeError("once more")
        return n

    handle = job.delay("A", 0)
    worker = app.worker(burst=True)
    for _ in range(5):
        drain(worker)
        clock.advance(1100)
    assert ran == [0, 0]
    assert handle.get(timeout=0) == 0
    assert group_keys(app.broker.transport.client) == []


def test_a_cancelled_solo_task_never_runs_and_its_group_goes(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    gone = job.delay("A", 0)
    job.delay("B", 0)
    assert gone.cancel() is True
    assert served(app, clock, 3) == ["B0"]
    try:
        gone.get(timeout=0)
    except TaskFailed as failed:
        assert failed.exc_type == "Cancelled"
    else:
        raise AssertionError("a cancelled task has a result")
    assert group_keys(client) == []
    assert queue_counts(app, "default")["ready"] == 0


def test_purge_deletes_a_solo_groups_task(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, ignore_result=True)
    client = app.broker.transport.client
    job.delay("A", 0)
    job.delay_many([("B", n) for n in range(2)])
    assert purge_ready(app, "default") == 3
    assert queue_counts(app, "default")["ready"] == 0
    assert [k for k in group_keys(client) if not k.endswith(":cancelled")] == []
    job.delay("A", 9)
    assert served(app, clock, 2) == ["A9"]


def test_status_counts_solo_groups(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    for tenant in "ABC":
        job.delay(tenant, 0)
    job.delay("C", 1)
    counts = app.broker.flow.group_counts_many(["default"])["default"]
    assert counts["grouped"] == 4 and counts["groups"] == 3
    assert counts["largest_groups"][0] == ("C", 2)
    assert queue_counts(app, "default")["ready"] == 4
