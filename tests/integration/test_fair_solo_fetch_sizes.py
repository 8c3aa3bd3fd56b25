"""Fair queues: fetch.lua's fast path for solo groups at every fetch size (issue 35).

The fast path keeps the first solo group it serves in a fetch apart from the others
(a fetch of one makes no table), tells a token by one match, and writes its removals
once a fetch. These tests drain solo groups by fetches of one (a process-pool
child's), of three, and of more than a worker's default prefetch: each task is served
once, in the order sent, and the emptied groups leave nothing. A solo group whose task
id is no printable ASCII goes to serve() and is served in its turn all the same. Each
runs on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

from typing import Callable, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from tests.support.clock import ManualClock
from tests.support.fair import fetch, served, tenant_app


def _group_keys(client: "redis.Redis[bytes]") -> List[str]:
    """The keys of the queue's groups and their bookkeeping that exist."""
    return sorted(key.decode() for key in client.keys("*")
                  if b":g:" in key or b"groups" in key or key.endswith(b":cancelled"))


@pytest.mark.parametrize("count", [1, 3, 12])
def test_solo_groups_drained_by_fetches_of_any_size_are_served_once_in_order(
        make_app: Callable[..., Minitask], clock: ManualClock, count: int) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    groups = [f"t{n:02d}" for n in range(14)]
    for group in groups:
        job.delay(group, 0)
    assert queue_counts(app, "default")["ready"] == len(groups)
    fetches = -(-len(groups) // count)
    assert served(app, clock, fetches, count=count) == [f"{group}0" for group in groups]
    assert queue_counts(app, "default")["ready"] == 0
    assert _group_keys(client) == []
    for group in groups[:2]:  # each group starts afresh, solo again
        job.delay(group, 1)
    assert served(app, clock, 2, count=count) == [f"{group}1" for group in groups[:2]]
    assert _group_keys(client) == []


def test_a_solo_group_whose_task_id_is_not_ascii_is_served_in_its_turn(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("S1", 0)
    job.apply_async(("U", 0), task_id="tâche-é")  # its token fits no fast path
    job.delay("S2", 0)
    found = fetch(app, clock, count=10).deliveries
    assert [d.task_id for d in found][1] == "tâche-é"
    assert [f"{d.message().args[0]}{d.message().args[1]}" for d in found] == [
        "S10", "U0", "S20"]
    assert queue_counts(app, "default")["ready"] == 0
    assert _group_keys(client) == []
