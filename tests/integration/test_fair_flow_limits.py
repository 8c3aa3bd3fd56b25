"""Fair queues with flow control on one task (guide/fair-queues, "Composition"):
a grouped task starts only when both its group's limits and its task's own
(``rate_limit``, ``max_running``, per ``limit_key``) allow it. Driven with a manual
clock, on fakeredis and on the suite's redis-server (``redis_client``).

A group the task's limits hold waits in their park list (its token), is served
again when a slot frees or the rate allows, and holds no other work back.
"""
from __future__ import annotations

from typing import Any, Callable, List

from minitask import Minitask
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from tests.integration.test_flow_scripts import fetch, max_in_window
from tests.support.clock import ManualClock
from tests.support.draining import drain


def _groups_of(result: Any) -> List[str]:
    return [d.message().args[0] for d in result.deliveries if d.message().task == "heavy"]


def test_max_running_holds_every_group_and_each_outcome_serves_the_next_in_turn(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(name="heavy", group_by="tenant", max_running=2)
    def heavy(tenant: str, n: int) -> int:
        return n

    @app.task(name="free")
    def free(n: int) -> int:
        return n

    for tenant in "abc":
        heavy.delay_many([(tenant, n) for n in range(4)])
    free.delay(0)
    first = fetch(app, clock, count=10)
    # two starts of the task (a's and b's turns), and the free task behind them
    assert sorted(d.message().task for d in first.deliveries) == ["free", "heavy", "heavy"]
    assert sorted(_groups_of(first))[:2] == ["a", "b"]
    assert fetch(app, clock, count=10).deliveries == []  # the task's limit holds
    state = app.broker.flow.limiter_state("default", "5:heavy")
    assert len(state["running"]) == 2
    assert queue_counts(app, "default")["ready"] == 10  # no parked task counted twice
    # an outcome frees a slot: the next group in turn (c) starts, then a and b
    results = app.broker.results
    order: List[str] = []
    held = [d for d in first.deliveries if d.message().task == "heavy"]
    for _ in range(10):
        done = held.pop(0)
        assert results.ack("default", done.task_id, None, 0)
        more = fetch(app, clock, count=10)
        assert len(more.deliveries) == 1, order
        order += _groups_of(more)
        held += more.deliveries
    assert order == ["c", "a", "b"] * 3 + ["c"]
    for done in held:
        assert results.ack("default", done.task_id, None, 0)
    assert fetch(app, clock, count=10).deliveries == []
    _nothing_left(app)


def test_a_rate_limit_holds_across_groups_that_take_turns(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[Any] = []

    @app.task(name="paced", group_by="tenant", rate_limit="5/s", group_max_running=1)
    def paced(tenant: str, n: int) -> None:
        ran.append((clock.now_ms(), tenant, n))

    for tenant in "ab":
        paced.delay_many([(tenant, n) for n in range(10)])
    worker = app.worker()
    for _ in range(2000):  # 10 ms steps
        worker.run_once()
        clock.advance(0.01)
        if len(ran) == 20:
            break
    assert len(ran) == 20
    assert max_in_window([at for at, _, _ in ran], 1000) <= 5
    assert [tenant for _, tenant, _ in ran] == ["a", "b"] * 10  # turns kept
    for tenant in "ab":
        assert [n for _, t, n in ran if t == tenant] == list(range(10))
    _nothing_left(app)


def test_a_group_held_by_its_tasks_rate_waits_without_polling(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(name="slow", group_by="tenant", rate_limit="1/m")
    def slow(tenant: str, n: int) -> int:
        return n

    for tenant in "abc":
        slow.delay_many([(tenant, n) for n in range(2)])
    first = fetch(app, clock, count=10)
    assert len(first.deliveries) == 1  # one start a minute, whichever the group
    later = clock.now_ms() + 30_000
    for _ in range(3):  # each fetch says when to look again: not now
        clock.advance(0.5)
        again = fetch(app, clock, count=10)
        assert again.deliveries == [] and again.next_event_ms is not None
        assert again.next_event_ms >= later, again.next_event_ms - clock.now_ms()
    clock.advance(61)
    # the next start, in turn; the group behind it is held again, until the next minute
    assert len(fetch(app, clock, count=10).deliveries) == 1
    clock.advance(0.5)
    again = fetch(app, clock, count=10)
    assert again.deliveries == [] and again.next_event_ms is not None
    assert again.next_event_ms >= clock.now_ms() + 25_000  # a lease's end, or the rate's


def test_per_call_groups_and_limit_keys_combine(make_app: Callable[..., Minitask],
                                                clock: ManualClock) -> None:
    app = make_app()

    @app.task(name="keyed", max_running=1)
    def keyed(n: int) -> int:
        return n

    handles = [keyed.apply_async((n,), group=f"g{n % 2}", limit_key=f"k{n % 3}")
               for n in range(6)]
    first = fetch(app, clock, count=10)
    # one slot per key, groups in turn: g0's k0, g1's k1, g0's k2; then g1's next (k0)
    # and g0's (k1) wait for their keys' slots
    assert [d.task_id for d in first.deliveries] == [h.id for h in handles[:3]]
    assert fetch(app, clock, count=10).deliveries == []
    worker = app.worker()
    for done in first.deliveries:
        assert app.broker.results.ack("default", done.task_id, None, 0)
    for _ in range(50):
        drain(worker)
        if all(h.status() == "succeeded" for h in handles):
            break
    assert [h.get(timeout=1) for h in handles[3:]] == [3, 4, 5]
    _nothing_left(app)


def test_purge_drops_groups_held_by_their_tasks_limits(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(name="solo", group_by="tenant", max_running=1)
    def solo(tenant: str, n: int) -> int:
        return n

    for tenant in "abc":
        solo.delay_many([(tenant, n) for n in range(3)])
    (running,) = fetch(app, clock, count=10).deliveries
    assert app.broker.flow.limiter_state("default", "4:solo")["parked"] >= 1  # tokens
    assert queue_counts(app, "default").get("parked") is None  # a token is no task
    assert purge_ready(app, "default") == 8
    assert queue_counts(app, "default")["ready"] == 0
    assert app.broker.results.ack("default", running.task_id, None, 0)
    assert fetch(app, clock, count=10).deliveries == []
    _nothing_left(app)


def _nothing_left(app: Minitask) -> None:
    """No spec, no group, no parked entry or due limiter once everything ended."""
    client = app.broker.transport.client
    k = QueueKeys(app.name, "default")
    assert client.hlen(k.flow) == 0
    leftovers = [key for key in client.keys(k.flow_prefix + "*")
                 if not key.endswith((b":starts", b":pace"))]  # these expire by themselves
    assert leftovers == []
    assert client.zcard(k.flow_due) == 0 or all(
        member.startswith(b"g:") for member in client.zrange(k.flow_due, 0, -1))
