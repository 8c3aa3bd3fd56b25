"""Fair queues meet data minitask did not write (guide/fair-queues, lib.lua's rules).

A group's ready set with a score that is no priority, a turn hash claiming a token
that is not there, or a grouped-ready count that is no integer: none strands a
group, writes into another key of the queue, or fails a send half-way. Each test
runs on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock

KEYS = QueueKeys("test", "default")


def served(app: Minitask, clock: ManualClock, fetches: int) -> List[str]:
    """``<group><n>`` (or ``p<n>``) of each task handed out by ``fetches`` fetches."""
    order = []
    for _ in range(fetches):
        result = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                         count=1, max_deliveries=5)
        for delivery in result.deliveries:
            args = delivery.message().args
            order.append(f"{args[0]}{args[1]}")
    return order


def _apps(make_app: Callable[..., Minitask], **options: Any) -> Any:
    app = make_app()

    @app.task(group_by="tenant", name="job", **options)
    def job(tenant: str, n: int) -> int:
        return n

    @app.task(name="plain")
    def plain(tenant: str, n: int) -> int:
        return n

    return app, job, plain


def _types(client: "redis.Redis[bytes]") -> Dict[str, str]:
    """The type of each of the queue's own keys that exists."""
    names = {"wake": KEYS.wake, "delayed": KEYS.delayed, "order": KEYS.order,
             "leases": KEYS.leases, "messages": KEYS.messages, "dead": KEYS.dead,
             "cancelled": KEYS.cancelled}
    return {name: client.type(key).decode() for name, key in names.items()
            if client.exists(key)}


@pytest.mark.parametrize("score", [-100_000_000_000_000, -2e14, float("inf"),
                                   float("-inf"), 5e15, 1.1e15, 1e15])
def test_a_score_that_is_no_priority_never_strands_the_group_nor_hits_another_key(
        make_app: Callable[..., Minitask], clock: ManualClock, score: float) -> None:
    app, job, plain = _apps(make_app)
    client = app.broker.transport.client
    plain.apply_async(("p", 0), delay=5)  # a delayed send: delayed and order hold it
    client.zadd(KEYS.fair_group("t1", "ready"), {"fakeid1": score})
    job.delay_many([("t1", n) for n in range(3)])
    assert _types(client) == {"delayed": "zset", "order": "hash", "messages": "hash",
                              "cancelled": "zset", "wake": "list"}
    assert served(app, clock, 5) == ["t10", "t11", "t12"]
    clock.advance(5)
    plain.apply_async(("p", 1), delay=1)  # delayed sends still work
    assert served(app, clock, 2) == ["p0"]
    clock.advance(1)
    assert served(app, clock, 2) == ["p1"]
    assert client.zcard(KEYS.fair_group("t1", "ready")) == 0


def test_a_real_task_with_a_foreign_score_is_served_last_and_its_group_goes_on(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    first = job.delay("t1", 0)
    job.delay("t1", 1)
    client.zadd(KEYS.fair_group("t1", "ready"), {first.id: float("-inf")})
    job.delay("t2", 0)
    assert sorted(served(app, clock, 6)) == ["t10", "t11", "t20"]


@pytest.mark.parametrize("turn", [{"tok": "999", "band": "9"}, {"tok": "999", "band": "inf"},
                                  {"tok": "1.1", "band": "inf"}, {"tok": "1.1", "band": "9"},
                                  {"tok": "1.1", "band": "-5"}, {"gen": "abc"},
                                  {"tok": "1.1", "band": "9", "served": "-1e300"}])
def test_a_planted_turn_never_keeps_a_new_group_out_of_the_rotation(
        make_app: Callable[..., Minitask], clock: ManualClock, turn: Dict[str, str]) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    client.hset(KEYS.fair_group("t1", "turn"), mapping=turn)
    job.delay_many([("t1", n) for n in range(3)])
    job.delay_many([("t2", n) for n in range(3)])
    got = served(app, clock, 8)
    assert sorted(got) == ["t10", "t11", "t12", "t20", "t21", "t22"]
    assert [name for name in got if name.startswith("t1")] == ["t10", "t11", "t12"]


@pytest.mark.parametrize("turn", [{"tok": "999", "band": "9"}, {"tok": "1.1", "band": "9"},
                                  {"tok": "1.1", "band": "inf"}])
def test_a_turn_planted_while_the_group_is_in_the_rotation_is_repaired(
        make_app: Callable[..., Minitask], clock: ManualClock, turn: Dict[str, str]) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.delay_many([("t1", n) for n in range(3)])
    assert served(app, clock, 1) == ["t10"]
    client.hset(KEYS.fair_group("t1", "turn"), mapping=turn)
    job.delay("t1", 3)  # a join into a group in the rotation
    assert served(app, clock, 5) == ["t11", "t12", "t13"]


def test_a_turn_planted_while_the_group_waits_for_a_slot_is_repaired_when_it_frees(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app, group_max_running=1)
    client = app.broker.transport.client
    job.delay_many([("t1", n) for n in range(3)])
    result = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                     count=1, max_deliveries=5)
    (delivery,) = result.deliveries
    assert served(app, clock, 2) == []  # at its limit: out of the rotation
    client.hset(KEYS.fair_group("t1", "turn"), mapping={"tok": "1.1", "band": "9"})
    app.broker.results.ack("default", delivery.task_id, None, 0)
    assert served(app, clock, 2) == ["t11"]


def test_a_grouped_ready_count_at_2_to_the_63_is_started_afresh(
        make_app: Callable[..., Minitask]) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    client.set(KEYS.groups_ready, "9223372036854775807")
    job.delay("t1", 0)  # the count would overflow: sent whole all the same
    assert client.get(KEYS.groups_ready) == b"1"


@pytest.mark.parametrize("count", ["abc", "1e400", "99999999999999999999"])
def test_a_grouped_ready_count_that_is_no_integer_is_started_afresh(
        make_app: Callable[..., Minitask], clock: ManualClock, count: str) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    client.set(KEYS.groups_ready, count)
    job.delay("t1", 0)  # sent whole: no failure after its message was written
    assert client.get(KEYS.groups_ready) == b"1"
    job.delay_many([("t1", n) for n in range(1, 4)])
    client.set(KEYS.groups_ready, count)
    assert served(app, clock, 1) == ["t10"]  # the fetch's tally does not fail either
    assert served(app, clock, 4) == ["t11", "t12", "t13"]
    assert client.get(KEYS.groups_ready) is None


@pytest.mark.parametrize("count", ["abc", "1e400", "99999999999999999999"])
def test_a_purge_starts_a_grouped_ready_count_that_is_no_integer_afresh(
        make_app: Callable[..., Minitask], count: str) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.delay_many([("t2", n) for n in range(2)])
    client.set(KEYS.groups_ready, count)
    assert purge_ready(app, "default") == 2
    assert client.get(KEYS.groups_ready) is None
    assert queue_counts(app, "default")["ready"] == 0


def test_a_grouped_ready_count_of_another_type_is_left_alone(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    client.rpush(KEYS.groups_ready, "theirs")
    job.delay_many([("t1", n) for n in range(2)])
    assert served(app, clock, 3) == ["t10", "t11"]
    assert client.lrange(KEYS.groups_ready, 0, -1) == [b"theirs"]
