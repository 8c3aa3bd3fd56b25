"""An ack of grouped tasks whose leases hold no slot drops their specs unread (fair
queues, issue 35's cost target): the fetch that leased them says so (its ``flow``
answer 2: ``Delivery.slots`` False), and the ack passes the flow hash alone
instead of the four flow keys, so ack.lua deletes the specs without reading them
(no HMGET, no flow library). A lease that may hold a slot (``max_running``,
``group_max_running``) among them keeps the full path: its slot is freed.
"""
from __future__ import annotations

from typing import Any, Callable, List

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import Delivery, FetchTerms
from tests.support.clock import ManualClock
from tests.support.fair import fetch, tenant_app

KEYS = QueueKeys("test", "default")


def _acks(app: Minitask, leased: List[Delivery]) -> List[Any]:
    results = app.broker.results
    return [results.prepare_ack("default", d.task_id, None, 0, flow=d.flow, slots=d.slots)
            for d in leased]


def _ack_keys(app: Minitask, leased: List[Delivery]) -> int:
    """How many keys past the fixed ones the ack of ``leased`` would pass."""
    results = app.broker.results
    [call] = results._ack_calls(results._ack_groups(_acks(app, leased)))
    return int(call[4])


def _group_keys(client: Any) -> List[bytes]:
    return [key for key in client.keys("*") if b":g:" in key or b"flow:groups" in key]


def test_grouped_tasks_of_no_limits_are_acked_with_their_specs_dropped_unread(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([(f"t{n}", n) for n in range(3)] + [("A", 7), ("A", 8)])
    leased = fetch(app, clock, count=5).deliveries
    assert len(leased) == 5
    assert all(d.flow and not d.slots for d in leased)
    assert _ack_keys(app, leased) == 1  # the flow hash alone
    assert redis_client.hlen(KEYS.flow) == 5
    assert app.broker.results.ack_many(_acks(app, leased)) == [True] * 5
    assert redis_client.hlen(KEYS.flow) == 0
    assert _group_keys(redis_client) == []


def test_a_drain_call_drops_the_specs_of_grouped_tasks_of_no_limits(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app, job = tenant_app(make_app)
    job.delay_many([(f"t{n}", n) for n in range(4)])
    leased = fetch(app, clock, count=2).deliveries
    queues, results = app.broker.queues, app.broker.results
    held, reply = results.ack_then(_acks(app, leased), queues.fetch_call(
        "default", clock.now_ms(), FetchTerms(30_000, 2, 5)))
    assert held == [True, True]
    rest = queues.fetch_result(reply).deliveries
    assert len(rest) == 2 and all(not d.slots for d in rest)
    assert redis_client.hlen(KEYS.flow) == 2  # only the two leased now keep theirs
    held, _ = results.ack_then(_acks(app, rest), queues.fetch_call(
        "default", clock.now_ms(), FetchTerms(30_000, 2, 5)))
    assert held == [True, True]
    assert redis_client.hlen(KEYS.flow) == 0
    assert _group_keys(redis_client) == []


def test_a_lease_holding_a_group_slot_keeps_the_full_ack_and_frees_its_slot(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app, job = tenant_app(make_app)

    @app.task(group_by="tenant", name="serial", group_max_running=1)
    def serial(tenant: str, n: int) -> int:
        return n

    job.delay("A", 1)
    first, second = serial.delay("B", 1), serial.delay("B", 2)
    leased = fetch(app, clock, count=3).deliveries
    assert first.id in [d.task_id for d in leased]
    assert second.id not in [d.task_id for d in leased]  # its group's one slot is held
    assert all(d.flow and d.slots for d in leased)  # one holds a slot: the whole fetch says so
    assert _ack_keys(app, leased) == 4
    running = KEYS.flow_prefix + "g:B:running"
    assert redis_client.smembers(running) == {first.id.encode()}
    assert app.broker.results.ack_many(_acks(app, leased)) == [True] * len(leased)
    assert not redis_client.exists(running)  # the slot freed: B's second task may start
    [d] = fetch(app, clock).deliveries
    assert d.task_id == second.id
