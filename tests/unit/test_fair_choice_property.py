"""The fetch's choice between groups (guide/fair-queues), over random mixes of
groups, weights, priorities, group_max_running limits and pauses (Hypothesis).

Over every window from the first fetch, each eligible group of the highest priority
has had its weight's share within one turn (its count over its weight differs from
any other's by at most 1); a paused group gets nothing; a limited group no more than
its limit (nothing is acked); a group of a lower priority nothing while one of the
highest priority can be served.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import fakeredis
from hypothesis import HealthCheck, given, settings, strategies as st

from minitask import Minitask
from tests.support.clock import ManualClock

FETCHES = 30
BACKLOG = 40  # more than FETCHES: an unlimited group never runs dry in the window

#: (weight, priority, paused, group_max_running or None), per group
Group = Tuple[int, int, bool, Optional[int]]

groups_strategy = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from([5, 9]), st.booleans(),
              st.one_of(st.none(), st.integers(1, 2))),
    min_size=2, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=groups_strategy, order=st.randoms(use_true_random=False))
def test_each_eligible_group_gets_its_weights_share_within_one_turn(
        groups: List[Group], order: object) -> None:
    clock = ManualClock()
    app = Minitask("prop", broker=fakeredis.FakeRedis(server=fakeredis.FakeServer()),
                   clock=clock)
    tasks = {}
    for limit in (None, 1, 2):
        for priority in (5, 9):
            def run(group: str, n: int) -> None:
                return None

            tasks[limit, priority] = app.task(name=f"job{limit}-{priority}", group_by="group",
                                              group_max_running=limit, priority=priority)(run)
    names = [f"g{i}" for i in range(len(groups))]
    for name, (weight, _, paused, _) in zip(names, groups):
        if weight != 1:
            app.set_group_weight("default", name, weight)
        if paused:
            app.pause_group("default", name)
    sends = list(zip(names, groups))
    order.shuffle(sends)  # type: ignore[attr-defined]
    for name, (_, priority, _, limit) in sends:
        tasks[limit, priority].delay_many([(name, n) for n in range(BACKLOG)])

    counts: Dict[str, int] = {name: 0 for name in names}
    spec = dict(zip(names, groups))
    eligible = [n for n in names if not spec[n][2]]
    top = max((spec[n][1] for n in eligible), default=None)
    fair = [n for n in eligible if spec[n][1] == top and spec[n][3] is None]
    for _ in range(FETCHES):
        result = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                         count=1, max_deliveries=5)
        for delivery in result.deliveries:
            group, n = delivery.message().args
            counts[group] += 1
            # a group's own tasks in order
            assert n == counts[group] - 1
        shares = [counts[n] / spec[n][0] for n in fair]
        if shares:
            assert max(shares) - min(shares) <= 1, (counts, groups)
    for name in names:
        weight, priority, paused, limit = spec[name]
        if paused:
            assert counts[name] == 0
        if limit is not None:
            assert counts[name] <= limit
        if fair and priority != top:
            assert counts[name] == 0, (counts, groups)
    if fair:  # every fetch handed a task out
        assert sum(counts.values()) == FETCHES
