"""Fair queues meet data minitask did not write (guide/fair-queues, lib.lua's rules).

A group's ready set with a score that is no priority, a turn hash claiming a token
that is not there, or a grouped-ready count that is no integer: none strands a
group, writes into another key of the queue, or fails a send half-way. A key a
grouped send writes (its group's ready set or turn, the ready list its token goes
to) holding another type refuses the send, naming the task, its group and the key,
with nothing written: written past, the task would never run. Each test runs on
fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

from minitask import Minitask
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.clock import ManualClock
from tests.support.fair import served

KEYS = QueueKeys("test", "default")


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
                                  {"tok": "1.1", "band": "9", "served": "-1e300"},
                                  # a solo group's claim (its task in it), or one in its
                                  # set form since ('+'), naming no token
                                  {"tok": "1.1/5nope", "band": "9"}, {"tok": "1.1/", "band": "5"},
                                  {"tok": "+1.1/5nope", "band": "5"}, {"tok": "+1.1", "band": "5"},
                                  {"tok": "1.99999999999999999999/5x", "band": "5"},
                                  {"tok": b"1.1/5\xff\xfe", "band": "0"}])
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
                                  {"tok": "1.1", "band": "inf"}, {"tok": "1.1/5nope", "band": "9"},
                                  {"tok": "+1.1/5nope", "band": "5"}])
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
    # the count would overflow: sent whole all the same (a solo group's one task is
    # counted by its token, not there: the second task's join counts both)
    job.delay_many([("t1", 0), ("t1", 1)])
    assert client.get(KEYS.groups_ready) == b"2"


@pytest.mark.parametrize("count", ["abc", "1e400", "99999999999999999999"])
def test_a_grouped_ready_count_that_is_no_integer_is_started_afresh(
        make_app: Callable[..., Minitask], clock: ManualClock, count: str) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    client.set(KEYS.groups_ready, count)
    # sent whole: no failure after its message was written (the second task's join
    # counts both: a solo group's one task is counted by its token, not there)
    job.delay_many([("t1", 0), ("t1", 1)])
    assert client.get(KEYS.groups_ready) == b"2"
    job.delay_many([("t1", n) for n in range(2, 4)])
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


# -- keys of another type where a grouped send writes --------------------------------

def _plant(client: "redis.Redis[bytes]", key: str, kind: str) -> None:
    client.delete(key)
    if kind == "string":
        client.set(key, "someone else's")
    elif kind == "list":
        client.rpush(key, "someone else's")
    elif kind == "set":
        client.sadd(key, "someone else's")
    elif kind == "zset":
        client.zadd(key, {"someone else's": 1})
    else:
        client.hset(key, "someone", "else")


def _everything(client: "redis.Redis[bytes]") -> Dict[bytes, Any]:
    """Every key and what it holds: a refused send must change none."""
    found: Dict[bytes, Any] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        if kind == b"list":
            found[key] = client.lrange(key, 0, -1)
        elif kind == b"zset":
            found[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            found[key] = client.hgetall(key)
        elif kind == b"set":
            found[key] = client.smembers(key)
        else:
            found[key] = client.get(key)
    return found


#: Where a grouped send of group t1 at priority 5 writes, with the types that are not
#: minitask's there: its group's ready set, its group's turn, the priority's ready list.
WRITTEN = [(KEYS.fair_group("t1", "ready"), "zset"), (KEYS.fair_group("t1", "turn"), "hash"),
           (KEYS.ready[4], "list")]
OTHER_TYPES = ["string", "list", "set", "zset", "hash"]


@pytest.mark.parametrize("key, kept", WRITTEN)
def test_a_key_a_grouped_send_writes_of_another_type_refuses_it_naming_task_and_key(
        make_app: Callable[..., Minitask], clock: ManualClock, key: str, kept: str) -> None:
    app, job, plain = _apps(make_app)
    client = app.broker.transport.client
    job.apply_async(("t2", 0), priority=3)  # another group, and an ungrouped task, before
    plain.apply_async(("p", 0), priority=3)
    for kind in (kind for kind in OTHER_TYPES if kind != kept):
        _plant(client, key, kind)
        before = _everything(client)
        with pytest.raises(BrokerError) as caught:
            job.apply_async(("t1", 1), task_id="the-task")
        message = str(caught.value)
        assert key in message and "the-task" in message and "group t1" in message, message
        assert caught.value.reason == "script", message
        assert _everything(client) == before, "a refused send wrote part of its work"
        # a batch that mixes it with sound messages is refused whole
        with pytest.raises(BrokerError):
            job.delay_many([("t3", 0), ("t1", 2), ("t2", 1)])
        assert _everything(client) == before, "a refused batch wrote part of its work"
    client.delete(key)  # what the error says to do
    job.apply_async(("t1", 1), task_id="the-task")
    assert sorted(served(app, clock, 5)) == ["p0", "t11", "t20"]


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(WRITTEN), kind=st.sampled_from(OTHER_TYPES),
       batch=st.lists(st.tuples(st.sampled_from(["t1", "t2", None]), st.integers(0, 9)),
                      min_size=1, max_size=6))
def test_any_send_meeting_a_planted_group_key_is_refused_and_every_other_runs(
        redis_client: "redis.Redis[bytes]", clock: ManualClock,
        where: Any, kind: str, batch: List[Any]) -> None:
    # whatever the mix of groups, ungrouped calls and priorities: a send whose grouped
    # call of t1 would write to the planted key (its priority's list: 5) is refused with
    # nothing written; any other is sent whole, and every task of it runs
    redis_client.flushall()
    app = Minitask("test", broker=redis_client, clock=clock)

    @app.task(group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        return n

    @app.task(name="plain")
    def plain(tenant: str, n: int) -> int:
        return n

    key, kept = where
    if kind == kept:
        kind = "string"
    _plant(redis_client, key, kind)

    def refused(tenant: Any, priority: int) -> bool:
        if key == KEYS.ready[4]:
            return priority == 5  # grouped or not: its ready list
        return tenant == "t1"

    before = _everything(redis_client)
    try:
        for n, (tenant, priority) in enumerate(batch):
            task = job if tenant else plain
            # one send per call, in order: each refused one must change nothing
            if refused(tenant, priority):
                with pytest.raises(BrokerError) as caught:
                    task.apply_async((tenant or "p", n), priority=priority)
                assert key in str(caught.value), str(caught.value)
                assert _everything(redis_client) == before, "a refused send wrote"
            else:
                task.apply_async((tenant or "p", n), priority=priority)
                before = _everything(redis_client)
        redis_client.delete(key)
        got = served(app, clock, 2 * len(batch) + 2)
        sent = [f"{tenant or 'p'}{n}" for n, (tenant, priority) in enumerate(batch)
                if not refused(tenant, priority)]
        assert sorted(got) == sorted(sent), batch
    finally:
        app.close()


# -- keys of another type met after a send: moved aside, the task goes on ------------

#: Where a grouped task joining its group later (a due delayed task, a lease expired)
#: writes: its group's ready set and turn; what minitask keeps there.
JOINED = [("ready", "zset"), ("turn", "hash")]


def _moved_aside(client: "redis.Redis[bytes]", key: str, kind: str) -> None:
    """``key`` holds minitask's own state again, and what was planted there waits,
    unchanged, at ``key``:foreign."""
    assert client.type(f"{key}:foreign").decode() == kind
    if kind == "string":
        assert client.get(f"{key}:foreign") == b"someone else's"


#: Each of those keys with each type minitask does not keep there
JOINED_PLANTS = [(part, kind) for part, kept in JOINED for kind in OTHER_TYPES if kind != kept]


@pytest.mark.parametrize("part, kind", JOINED_PLANTS)
def test_a_group_key_planted_while_its_task_waits_delayed_is_moved_aside_and_the_task_runs(
        make_app: Callable[..., Minitask], clock: ManualClock, part: str, kind: str) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.apply_async(("t1", 0), delay=5)
    job.delay("t2", 0)
    key = KEYS.fair_group("t1", part)
    _plant(client, key, kind)
    clock.advance(5)
    assert sorted(served(app, clock, 4)) == ["t10", "t20"]
    _moved_aside(client, key, kind)


@pytest.mark.parametrize("part, kept", JOINED)
def test_a_group_key_planted_while_its_task_runs_is_moved_aside_when_its_lease_expires(
        make_app: Callable[..., Minitask], clock: ManualClock, part: str, kept: str) -> None:
    # (kept: what minitask keeps there; a string is never it)
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.delay("t1", 0)
    result = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=1_000,
                                     count=1, max_deliveries=5)
    assert len(result.deliveries) == 1
    key = KEYS.fair_group("t1", part)
    _plant(client, key, "string")
    clock.advance(2)  # its worker is gone: the task goes back, and joins its group
    assert served(app, clock, 3) == ["t10"]
    _moved_aside(client, key, "string")


def test_a_ready_list_planted_where_a_groups_token_goes_back_is_moved_aside(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    # the group's first task is of priority 9; its token goes back to priority 5's list
    # once it is served (a send of priority 9 checks 9's list, not 5's)
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.apply_async(("t1", 0), priority=5)
    job.apply_async(("t1", 1), priority=9)
    _plant(client, KEYS.ready[4], "string")
    assert served(app, clock, 1) == ["t11"]  # never half-written: the fetch answers
    assert served(app, clock, 2) == ["t10"]
    _moved_aside(client, KEYS.ready[4], "string")


def test_a_turn_of_another_type_met_by_a_live_token_is_moved_aside_and_the_group_goes_on(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    job.delay_many([("t1", n) for n in range(3)])
    assert served(app, clock, 1) == ["t10"]
    _plant(client, KEYS.fair_group("t1", "turn"), "list")
    assert served(app, clock, 4) == ["t11", "t12"]
    _moved_aside(client, KEYS.fair_group("t1", "turn"), "list")


def test_a_second_planting_is_moved_aside_beside_the_first(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    key = KEYS.fair_group("t1", "ready")
    for n in range(2):
        job.apply_async(("t1", n), delay=1)
        _plant(client, key, "string")
        clock.advance(1)
        assert served(app, clock, 2) == [f"t1{n}"]
    assert client.get(f"{key}:foreign") == b"someone else's"
    assert client.get(f"{key}:foreign2") == b"someone else's"


def test_a_101st_planting_replaces_the_last_key_aside_and_its_task_still_runs(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job, _ = _apps(make_app)
    client = app.broker.transport.client
    key = KEYS.fair_group("t1", "ready")
    client.set(f"{key}:foreign", "older")
    for n in range(2, 101):
        client.set(f"{key}:foreign{n}", "older")
    job.apply_async(("t1", 0), delay=1)
    _plant(client, key, "string")
    clock.advance(1)
    assert served(app, clock, 2) == ["t10"]
    assert client.get(f"{key}:foreign100") == b"someone else's"
    assert client.get(f"{key}:foreign99") == b"older"


def test_a_park_list_planted_where_a_groups_token_waits_is_moved_aside(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    # a grouped task whose own max_running holds its group: the group's token waits in
    # the task's park list (planted: the token went nowhere, and the group stayed out)
    app = make_app()

    @app.task(name="solo", group_by="tenant", max_running=1)
    def solo(tenant: str, n: int) -> int:
        return n

    client = app.broker.transport.client
    park = KEYS.flow_prefix + "4:solo:park"
    _plant(client, park, "string")
    solo.delay("a", 0)
    solo.delay("b", 0)
    (running,) = served_deliveries(app, clock)
    assert served_deliveries(app, clock) == []  # b's group waits: its token parked
    _moved_aside(client, park, "string")
    assert app.broker.results.ack("default", running.task_id, None, 0)
    (second,) = served_deliveries(app, clock)
    assert {running.message().args[0], second.message().args[0]} == {"a", "b"}


def served_deliveries(app: Minitask, clock: ManualClock) -> List[Any]:
    return list(app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                        count=10, max_deliveries=5).deliveries)
