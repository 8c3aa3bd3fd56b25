"""What a grouped task's fetch costs Redis (guide/fair-queues, "What it costs"),
counted in commands on the suite's own redis-server (``INFO commandstats``): the
commands a script runs are counted one by one there, and each costs the script
about a microsecond beside its own work, so their number is the cost that grows
or not with the number of groups. Counts, not times: nothing here depends on the
machine's speed or load.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

FETCHES, COUNT = 5, 10


def _commands(client: "redis.Redis[bytes]") -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[8:]: int(stat["calls"]) for name, stat in stats.items()
            if name.startswith("cmdstat_")}


def _per_task(app: Minitask, clock: ManualClock, client: "redis.Redis[bytes]") -> float:
    """Commands Redis ran per task for FETCHES fetches of COUNT tasks each (the
    script calls themselves, and this test's own INFO, left out)."""
    before = _commands(client)
    leased = 0
    for _ in range(FETCHES):
        leased += len(app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                              count=COUNT, max_deliveries=5).deliveries)
    after = _commands(client)
    assert leased == FETCHES * COUNT
    spent = sum(calls - before.get(name, 0) for name, calls in after.items()
                if name not in ("evalsha", "eval", "info", "script|load"))
    return spent / leased


@pytest.fixture
def fresh(redis_server: RedisServer, clock: ManualClock) -> Callable[..., Any]:
    client = redis_server.client()

    def make() -> Any:
        client.flushall()
        app = Minitask("costs", broker=redis_server.client(), clock=clock)

        @app.task(group_by="tenant", name="job", ignore_result=True)
        def job(tenant: str, n: int) -> None:
            pass

        @app.task(name="plain", ignore_result=True)
        def plain(tenant: str, n: int) -> None:
            pass

        return app, job, plain, client

    return make


@pytest.mark.integration
@pytest.mark.parametrize("per_group, few, many", [(1, 60, 5000), (10, 10, 500)])
def test_a_grouped_fetch_runs_as_many_commands_with_few_groups_or_thousands(
        fresh: Callable[..., Any], clock: ManualClock, per_group: int, few: int,
        many: int) -> None:
    # per_group 1: each task served empties its group; 10: each group has a next task
    # whenever it is served (the 50 tasks fetched are 5 of each of 10 groups, or the
    # first of 50 of the 500)
    costs = {}
    for groups in (few, many):
        app, job, _, client = fresh()
        job.delay_many([(f"t{n % groups}", n) for n in range(groups * per_group)])
        costs[groups] = _per_task(app, clock, client)
        app.close()
    print(f"commands per grouped task, {per_group} a group, by groups: {costs}")
    assert costs[few] == costs[many]


@pytest.mark.integration
def test_a_grouped_fetch_stays_within_a_few_commands_of_an_ungrouped_one(
        fresh: Callable[..., Any], clock: ManualClock) -> None:
    app, _, plain, client = fresh()
    plain.delay_many([("p", n) for n in range(FETCHES * COUNT)])
    ungrouped = _per_task(app, clock, client)
    app.close()
    app, job, _, client = fresh()
    job.delay_many([(f"t{n}", n) for n in range(FETCHES * COUNT)])
    groups_of_one = _per_task(app, clock, client)
    app.close()
    app, job, _, client = fresh()
    job.delay_many([("one", n) for n in range(FETCHES * COUNT)])
    one_group = _per_task(app, clock, client)
    app.close()
    print(f"commands per task: ungrouped {ungrouped}, groups of one {groups_of_one}, "
          f"one group {one_group}")
    # the lease, its delivery count and the message read as for any task; then the
    # group's token popped, its turn and its first two tasks read, the spec read, the
    # task taken from its group, and the token put back or the group's keys deleted.
    # A group of one (solo) holds its task in its token: its turn and the spec read,
    # no ready set. The rotation's counts are written once a fetch, the pause and
    # weight lookups skipped while no group has any.
    # An ungrouped fetch of ten pops its ids with one LPOP (issue 36); a group's token
    # is popped on its own each time it is served (the list holds one token a group):
    # one command a task more than before against the ungrouped one (6.4, 9.0 and 12.1
    # commands a task before that change; 3.6, 6.2 and 10.2 after it).
    assert groups_of_one <= ungrouped + 3
    assert one_group <= ungrouped + 7


def test_counts_written_once_a_fetch_stay_exact(make_app: Callable[..., Minitask],
                                                clock: ManualClock) -> None:
    # a fetch's serves owe their groups' counts until its end (flow.lua's flush):
    # groups served several times, emptied, weighted and paused in one fetch
    app = make_app()

    @app.task(group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        return n

    job.delay_many([("A", n) for n in range(6)] + [("B", 0)] + [("C", n) for n in range(4)]
                   + [("D", n) for n in range(3)])
    app.set_group_weight("default", "C", 2)
    app.pause_group("default", "D")
    got = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000, count=7,
                                  max_deliveries=5)
    served = [f"{d.message().args[0]}{d.message().args[1]}" for d in got.deliveries]
    assert served == ["A0", "B0", "C0", "C1", "A1", "C2", "C3"]
    counts = queue_counts(app, "default")
    assert (counts["ready"], counts["grouped"], counts["groups"]) == (7, 7, 2)
    assert counts["largest_groups"] == [("A", 4), ("D", 3)]
    app.resume_group("default", "D")
    got = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000, count=20,
                                  max_deliveries=5)
    assert len(got.deliveries) == 7
    assert "grouped" not in queue_counts(app, "default")
