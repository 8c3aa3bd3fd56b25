"""A fetch of several tasks serves a group whose token would be its next pop again
without popping and pushing it back (issue 35): the token is kept in hand while the
fetch wants more (alone in its list, or at the head for its weight's turn) and pushed
back once when the fetch ends. The order served is the one popping it each time gave,
turns, weights, priorities and limits included; and it costs one pop and one push a
fetch, not one each a task (counted on the suite's own redis-server)."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import queue_keys
from tests.support.clock import ManualClock

pytestmark = pytest.mark.integration

KEYS = queue_keys("kept", "default")


@pytest.fixture
def client(admin: "redis.Redis[bytes]") -> Iterator["redis.Redis[bytes]"]:
    yield admin


@pytest.fixture
def app(redis_server: Any, client: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = Minitask("kept", broker=redis_server.client(), clock=ManualClock())

    @made.task(group_by="tenant", name="job", ignore_result=True)
    def job(tenant: str, n: int) -> None:
        pass

    @made.task(group_by="tenant", name="capped", group_max_running=2, ignore_result=True)
    def capped(tenant: str, n: int) -> None:
        pass

    @made.task(name="plain", ignore_result=True)
    def plain(tenant: str, n: int) -> None:
        pass

    try:
        yield made
    finally:
        made.close()


def _fetch(app: Minitask, count: int) -> List[Tuple[str, int]]:
    """The (tenant, n) of each task leased, in order."""
    found = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=60_000,
                                    count=count, max_deliveries=5)
    return [(str(delivery.message().args[0]), int(delivery.message().args[1]))
            for delivery in found.deliveries]


def _commands(client: "redis.Redis[bytes]") -> Dict[str, int]:
    return {name[8:]: int(stat["calls"]) for name, stat in client.info("commandstats").items()
            if name.startswith("cmdstat_")}


def test_a_fetch_of_ten_from_one_group_pops_and_pushes_its_token_once(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    app.tasks["job"].delay_many([("acme", n) for n in range(25)])
    client.config_resetstat()
    assert _fetch(app, 10) == [("acme", n) for n in range(10)]
    calls = _commands(client)
    assert calls.get("lpop") == 1 and calls.get("rpush") == 1, calls
    # the group's first tasks read once a run (and the first delayed task, once)
    assert calls.get("zrange") == 2, calls
    assert _fetch(app, 10) == [("acme", n) for n in range(10, 20)]
    assert _fetch(app, 10) == [("acme", n) for n in range(20, 25)]
    assert queue_counts(app, "default")["ready"] == 0
    assert list(client.scan_iter(match=f"{KEYS.flow_prefix}g:*")) == []


def test_turns_with_other_groups_and_ungrouped_tasks_are_kept(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    app.tasks["job"].delay_many([("big", n) for n in range(6)])
    app.tasks["plain"].delay("none", 0)
    app.tasks["job"].delay("small", 0)
    app.set_group_weight("default", "big", 3)
    # big's turn of three, the ungrouped task, small, then big's next turn
    assert _fetch(app, 6) == [("big", 0), ("big", 1), ("big", 2), ("none", 0), ("small", 0),
                              ("big", 3)]
    # its turn goes on where the fetch left it: two more, then (alone) the rest
    assert _fetch(app, 10) == [("big", 4), ("big", 5)]


def test_a_run_stops_at_the_group_limit_and_at_a_lower_priority(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    app.tasks["capped"].delay_many([("acme", n) for n in range(4)])
    assert _fetch(app, 10) == [("acme", 0), ("acme", 1)]  # group_max_running=2
    assert queue_counts(app, "default")["ready"] == 2
    app.tasks["job"].apply_async(("prio", 0), priority=7)
    app.tasks["job"].apply_async(("prio", 1), priority=7)
    app.tasks["job"].apply_async(("prio", 2), priority=3)
    app.tasks["plain"].apply_async(("none", 0), priority=5)
    # the group's token moves to priority 3's list after its second task: behind the
    # priority 5 task, as popping it each time served it
    assert _fetch(app, 10) == [("prio", 0), ("prio", 1), ("none", 0), ("prio", 2)]


def test_tokens_popped_ahead_stay_out_while_each_served_goes_to_the_tail(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    tenants = [f"t{n}" for n in range(5)]
    app.tasks["job"].delay_many([(tenant, n) for n in range(3) for tenant in tenants])
    client.config_resetstat()
    # one pop of the five tokens: each served goes to the tail, behind the others
    assert _fetch(app, 5) == [(tenant, 0) for tenant in tenants]
    calls = _commands(client)
    assert calls.get("lpop") == 1 and calls.get("rpush") == 5, calls
    assert "lpush" not in calls, calls
    assert _fetch(app, 7) == [(tenant, 1) for tenant in tenants] + [("t0", 2), ("t1", 2)]
    app.tasks["plain"].delay("none", 0)
    assert _fetch(app, 10) == [("t2", 2), ("t3", 2), ("t4", 2), ("none", 0)]
    assert queue_counts(app, "default")["ready"] == 0
    assert list(client.scan_iter(match=f"{KEYS.flow_prefix}g:*")) == []


def test_a_weighted_run_that_meets_the_group_limit_leaves_its_turn_as_popping_did(
        app: Minitask, client: "redis.Redis[bytes]") -> None:
    app.set_group_weight("default", "acme", 3)
    app.tasks["capped"].delay_many([("acme", n) for n in range(4)])
    assert _fetch(app, 10) == [("acme", 0), ("acme", 1)]  # group_max_running=2
    # two fetches of its turn of three counted, as when the token was popped for each
    assert client.hget(f"{KEYS.flow_prefix}g:acme:turn", "served") == b"2"
