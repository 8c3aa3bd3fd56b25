"""Fair queues in the scripts (guide/fair-queues), driven with a manual clock.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``):
groups take turns, weights, pause and resume, group_max_running (strict order
across retries and lost leases), a group's rate, priorities, delayed tasks,
cancel and expiry, and no group state left behind once a group is empty.
"""
from __future__ import annotations

from typing import Callable, Dict, List

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from minitask import Minitask, TaskFailed
from minitask.admin import purge_ready, queue_counts
from minitask.dashboard.metrics import exposition
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.fair import fetch, served, tenant_app


def _keys(client: "redis.Redis[bytes]") -> List[str]:
    return sorted(key.decode() for key in client.keys("*"))


def test_a_small_group_is_served_within_a_few_fetches_of_a_big_backlog(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([("A", n) for n in range(50)])
    for tenant in "BCD":
        job.delay_many([(tenant, n) for n in range(2)])
    assert served(app, clock, 8) == ["A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1"]
    assert served(app, clock, 3) == ["A2", "A3", "A4"]  # the others are done: A alone


def test_a_fetch_of_several_takes_them_in_turns_too(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([("A", n) for n in range(20)])
    job.delay_many([("B", n) for n in range(20)])
    assert served(app, clock, 1, count=6) == ["A0", "B0", "A1", "B1", "A2", "B2"]


def test_ungrouped_tasks_take_their_turn_beside_groups(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)

    @app.task(name="plain")
    def plain(tenant: str, n: int) -> int:
        return n

    job.delay_many([("A", n) for n in range(10)])
    plain.delay_many([("P", n) for n in range(3)])
    # the group's token was queued first, then each plain task: the group gets one turn
    # between them, as one more task of the queue would
    assert served(app, clock, 6) == ["A0", "P0", "P1", "P2", "A1", "A2"]


def test_a_weight_gives_a_group_that_many_fetches_a_turn(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    app.set_group_weight("default", "A", 3)
    job.delay_many([("A", n) for n in range(20)])
    job.delay_many([("B", n) for n in range(20)])
    assert served(app, clock, 8) == ["A0", "A1", "A2", "B0", "A3", "A4", "A5", "B1"]
    app.set_group_weight("default", "A", 1)
    assert QueueKeys("test", "default").groups_weight.encode() not in \
        app.broker.transport.client.keys("*")


@pytest.mark.parametrize("planted", [b"inf", b"1e300", b"1.5", b"0", b"abc"])
def test_a_weight_minitask_did_not_write_counts_as_one(
        make_app: Callable[..., Minitask], clock: ManualClock, planted: bytes) -> None:
    app, job = tenant_app(make_app)
    app.set_group_weight("default", "A", 2)  # the weights hash exists: weights are read
    app.broker.transport.client.hset(QueueKeys("test", "default").groups_weight, "A", planted)
    job.delay_many([("A", n) for n in range(20)])
    job.delay_many([("B", n) for n in range(20)])
    assert served(app, clock, 6) == ["A0", "B0", "A1", "B1", "A2", "B2"]


def test_a_paused_group_holds_its_tasks_and_no_other_group(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    app.pause_group("default", "B")
    job.delay_many([("A", n) for n in range(3)])
    job.delay_many([("B", n) for n in range(3)])
    assert served(app, clock, 5) == ["A0", "A1", "A2"]
    assert app.resume_group("default", "B") is True
    assert app.resume_group("default", "B") is False
    assert served(app, clock, 4) == ["B0", "B1", "B2"]


def test_a_group_paused_while_in_the_rotation_leaves_it_at_its_next_turn(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([("A", n) for n in range(3)])
    job.delay_many([("B", n) for n in range(3)])
    assert served(app, clock, 2) == ["A0", "B0"]
    app.pause_group("default", "A")
    assert served(app, clock, 4) == ["B1", "B2"]
    app.resume_group("default", "A")
    assert served(app, clock, 3) == ["A1", "A2"]


def test_priorities_compose_within_and_across_groups(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([("A", n) for n in range(5)])
    job.apply_async(("A", 99), priority=9)  # before A's earlier, lower tasks
    job.apply_async(("B", 0))
    job.apply_async(("C", 0), priority=9)  # C holds a high-priority task: first
    # A took its turn with A99: B goes next at priority 5
    assert served(app, clock, 5) == ["A99", "C0", "B0", "A0", "A1"]


def test_group_max_running_holds_a_group_at_its_limit_and_never_the_others(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=2)
    job.delay_many([("A", n) for n in range(6)])
    job.delay_many([("B", n) for n in range(6)])
    first = fetch(app, clock, count=10)
    names = [f"{d.message().args[0]}{d.message().args[1]}" for d in first.deliveries]
    assert names == ["A0", "B0", "A1", "B1"]
    assert fetch(app, clock, count=10).deliveries == []  # both at their limit
    # an outcome frees a slot and brings its group back, at once
    app.broker.results.ack("default", first.deliveries[0].task_id, None, 0)
    assert served(app, clock, 2) == ["A2"]
    app.broker.results.ack("default", first.deliveries[1].task_id, None, 0)
    app.broker.results.ack("default", first.deliveries[3].task_id, None, 0)
    assert served(app, clock, 1, count=5) == ["B2", "B3"]


def test_with_group_max_running_1_a_retry_keeps_its_place(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[str] = []
    fails: Dict[str, int] = {"B1": 2}

    @app.task(group_by="tenant", group_max_running=1, retries=3, retry_backoff=1.0,
              name="job")
    def job(tenant: str, n: int) -> int:
        ran.append(f"{tenant}{n}")
        if fails.get(f"{tenant}{n}"):
            fails[f"{tenant}{n}"] -= 1
            raise RuntimeError("once more")
        return n

    for tenant in "AB":
        job.delay_many([(tenant, n) for n in range(3)])
    worker = app.worker(burst=True)
    for _ in range(10):
        drain(worker)
        clock.advance(700)  # past any backoff
    b_runs = [name for name in ran if name.startswith("B")]
    assert b_runs == ["B0", "B1", "B1", "B1", "B2"]
    assert sorted(ran) == sorted(["A0", "A1", "A2", "B0", "B1", "B1", "B1", "B2"])
    assert [k for k in _keys(app.broker.transport.client) if ":flow" in k] == []


def test_a_lost_lease_keeps_its_slot_and_comes_back_first_in_its_group(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    job.delay_many([("A", n) for n in range(3)])
    assert served(app, clock, 1) == ["A0"]
    assert served(app, clock, 2) == []  # A0 holds the group's one slot
    clock.advance(31)  # its worker died: the lease expires
    assert served(app, clock, 2) == ["A0"]  # re-delivered before A1, as the slot's holder
    assert served(app, clock, 2) == []


def test_a_group_rate_limit_holds_the_group_and_brings_it_back_when_due(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_rate_limit="2/s")
    job.delay_many([("A", n) for n in range(6)])
    job.delay_many([("B", n) for n in range(6)])
    got = served(app, clock, 8)
    assert [x for x in got if x.startswith("A")] == ["A0"]  # paced: one per 500 ms
    assert [x for x in got if x.startswith("B")] == ["B0"]
    result = fetch(app, clock)
    assert result.deliveries == [] and result.next_event_ms is not None
    clock.ms = result.next_event_ms
    assert sorted(served(app, clock, 3)) == ["A1", "B1"]


def test_a_delayed_grouped_task_joins_its_group_when_due(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([("A", n) for n in range(10)])
    job.apply_async(("B", 0), delay=5)
    assert served(app, clock, 2) == ["A0", "A1"]
    clock.advance(5)
    assert "B0" in served(app, clock, 4)


def test_a_cancelled_or_expired_grouped_task_never_runs(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    gone = job.delay("A", 0)
    late = job.apply_async(("A", 1), expires=2)
    kept = job.delay("A", 2)
    assert gone.cancel() is True
    clock.advance(3)
    worker = app.worker(burst=True)
    drain(worker)
    assert kept.get(timeout=0) == 2
    for handle, reason in ((gone, "Cancelled"), (late, "Expired")):
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=0)
        assert failed.value.exc_type == reason


def test_an_empty_group_leaves_nothing_behind(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1, group_rate_limit="1000/s",
                          ignore_result=True)

    @app.task(name="plain", ignore_result=True)
    def plain(tenant: str, n: int) -> int:
        return n

    client = app.broker.transport.client
    plain.delay("X", 0)
    drain(app.worker(burst=True))
    before = set(_keys(client))
    for tenant in "ABC":
        job.delay_many([(tenant, n) for n in range(3)])
    assert drain(app.worker(burst=True)) == 9
    left = set(_keys(client)) - before
    # only a rate's record of recent starts stays, and it expires on its own (a window)
    assert {key.rsplit(":", 1)[-1] for key in left} <= {"pace", "starts"}, left
    assert all(0 < client.pttl(key) <= 2000 for key in left)


def test_status_and_metrics_count_grouped_tasks_and_groups_not_tokens(
        make_app: Callable[..., Minitask], clock: ManualClock,
        capsys: "pytest.CaptureFixture[str]") -> None:
    app, job = tenant_app(make_app)

    @app.task(name="plain")
    def plain(tenant: str, n: int) -> int:
        return n

    job.delay_many([("A", n) for n in range(7)])
    job.delay_many([("B", n) for n in range(2)])
    plain.delay("P", 0)
    counts = queue_counts(app, "default")
    assert counts["ready"] == 10  # 9 grouped and 1 plain; the groups' tokens are no tasks
    assert counts["ready_by_priority"] == {"5": 1}
    assert (counts["grouped"], counts["groups"]) == (9, 2)
    assert counts["largest_groups"] == [("A", 7), ("B", 2)]
    samples = {}
    for family in text_string_to_metric_families(exposition(app).decode()):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    assert samples["minitask_queue_groups", (("queue", "default"),)] == 2
    assert samples["minitask_queue_tasks", (("queue", "default"), ("state", "ready"))] == 10
    served(app, clock, 3)  # A0, B0, P0
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"], counts["largest_groups"]) == \
        (7, 7, [("A", 6), ("B", 1)])
    assert drain(app.worker(burst=True)) == 7
    assert "grouped" not in queue_counts(app, "default")


def test_cancelling_a_retry_that_holds_its_groups_slot_frees_it(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task(group_by="tenant", group_max_running=1, retries=2, retry_backoff=60.0,
              name="job")
    def job(tenant: str, n: int) -> int:
        ran.append(f"{tenant}{n}")
        if n == 0:
            raise RuntimeError("later")
        return n

    first = job.delay("A", 0)
    job.delay("A", 1)
    worker = app.worker(burst=True)
    assert drain(worker) == 1  # A0 failed: its retry is a minute away, and holds the slot
    assert drain(worker) == 0 and ran == ["A0"]
    assert first.cancel() is True
    assert drain(worker) == 1 and ran == ["A0", "A1"]


def test_purge_deletes_grouped_ready_tasks_and_their_groups(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, ignore_result=True)
    job.delay_many([("A", n) for n in range(5)])
    job.delay_many([("B", n) for n in range(3)])
    assert served(app, clock, 1) == ["A0"]
    assert purge_ready(app, "default") == 7
    assert queue_counts(app, "default")["ready"] == 0
    assert [k for k in _keys(app.broker.transport.client) if ":g:" in k or "groups" in k] == []
    job.delay("A", 9)  # the group starts afresh
    assert served(app, clock, 2) == ["A9"]


def test_a_task_put_back_by_a_stopping_worker_keeps_its_place_and_slot(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    job.delay_many([("A", n) for n in range(3)])
    job.delay_many([("B", n) for n in range(3)])
    first = fetch(app, clock, count=1)
    (delivery,) = first.deliveries
    assert delivery.message().args == ["A", 0]
    assert app.broker.queues.release("default", [(delivery.task_id, 5)]) == 1
    assert served(app, clock, 3) == ["B0", "A0"]  # A0 again, before A1


def test_a_group_whose_tasks_are_all_cancelled_leaves_nothing_and_starts_afresh(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    handles = [job.delay("A", n) for n in range(3)]
    assert all(handle.cancel() for handle in handles)
    assert app.broker.flow.specs("default") == {}  # flow control off: the fetch meets the token
    assert served(app, clock, 2) == []
    client = app.broker.transport.client
    assert [k for k in _keys(client) if ":g:" in k or "groups" in k or "cancelled" in k] == []
    assert queue_counts(app, "default")["ready"] == 0
    job.delay("A", 7)
    assert served(app, clock, 1) == ["A7"]


def test_a_dead_letter_frees_its_slot_and_requeued_joins_its_group_again(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    first = job.delay("A", 0)
    second = job.delay("A", 1)
    job.delay("A", 2)
    assert served(app, clock, 1) == ["A0"]
    outcome = Outcome("dead", clock.now_ms(), exc_type="Poisoned", message="test")
    assert app.broker.results.bury("default", first.id, outcome=outcome, result_ttl_ms=0)
    assert served(app, clock, 1) == ["A1"]  # the dead letter's slot is free
    assert app.requeue_dead(first.id) is True
    assert app.broker.flow.specs("default")[first.id].rsplit("\n", 1)[1] == "A"
    assert served(app, clock, 2) == []  # A1 holds the slot: A0 waits in its group
    app.broker.results.ack("default", second.id, None, 0)
    assert served(app, clock, 2) == ["A2"]  # A0 joined at the group's tail


def test_purge_empties_every_group_however_many(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, ignore_result=True)
    job.delay_many([(f"t{n}", n) for n in range(1500)])  # more groups than a purge batch
    assert purge_ready(app, "default") == 1500
    assert [k for k in _keys(app.broker.transport.client) if ":g:" in k or "groups" in k] == []
