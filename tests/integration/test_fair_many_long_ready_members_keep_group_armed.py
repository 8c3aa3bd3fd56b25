"""A fair group's ready set holding more members longer than any minitask writes (a
priority's digit and an id: 201 bytes; issue 29: planted) than one call removes (its
cap of reads) never empties the group while its tasks wait behind them: the call
that reaches the cap keeps the group armed (a token at the tail of its list), so the
next fetch goes on removing, and every task of the group is served in its order. With
250 members of 202 bytes ahead of its tasks, the first fetch removed 198, handed out
nothing, and dropped the group's token, turn and ``groups`` entry: its tasks waited
for another send to the group, maybe forever."""
from __future__ import annotations

import time
from typing import Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

RANK = 100_000_000_000_000  # flow.lua's: orders below it, priorities above
TASKS = 3


def _fetch(app: Minitask, count: int) -> List[int]:
    deliveries = app.broker.queues.fetch(
        "default", now_ms=int(time.time() * 1000), lease_ms=60_000, count=count,
        max_deliveries=5).deliveries
    return [delivery.message().args[1] for delivery in deliveries]


@pytest.mark.parametrize("planted, size, after, count", [
    (250, 202, False, 1),     # the report's case: more than one call's reads of two
    (1_000, 202, False, 4),  # five a read at first (a fetch of four)
    (500, 202, True, 1),      # behind the group's tasks: met once they are served
    (7_000, 202, False, 1),   # more than a call removes 32 a read
    (500, 40_000, False, 1),  # too long to read 32 at once: two a read, 200 a call
    (250, 70_000, True, 1),   # the last task served, then all of them gone: clean
])
def test_group_behind_many_long_members_is_served_and_left_clean(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", planted: int, size: int,
        after: bool, count: int) -> None:
    app = Minitask(f"fairmanylong{planted}{size}{after}{count}", broker=redis_server.client())

    @app.task(group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        return n

    keys = QueueKeys(app.name, "default")
    ready = keys.fair_group("G", "ready")
    try:
        for n in range(TASKS):
            job.delay("G", n)
        base = 10 * RANK if after else 0
        members: Dict[bytes, float] = {
            b"0%06d" % i + b"p" * (size - 7): base + i for i in range(planted)}
        for start in range(0, planted, 1000):
            chunk = dict(list(members.items())[start:start + 1000])
            admin.zadd(ready, chunk)
        order: List[int] = []
        for _ in range(40):  # bounded: each fetch removes a cap's worth at least
            order += _fetch(app, count)
            if admin.exists(ready) == 0 and len(order) >= TASKS:
                break
        assert order == list(range(TASKS))
        assert admin.exists(ready) == 0
        assert admin.exists(keys.fair_group("G", "turn")) == 0
        assert admin.zscore(keys.groups, "G") is None
        assert _fetch(app, 4) == []
        assert all(admin.llen(key) == 0 for key in keys.ready)
    finally:
        app.close()
