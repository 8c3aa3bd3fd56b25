"""A member of a fair group's ready set longer than any minitask writes (a priority's
digit and an id: 201 bytes; issue 29: planted, 50 MB) is removed by its rank where a
send (arm's read of the group's first tasks) or a fetch meets it, never passed back to
Redis: it was served as an id at priority 0, looked up in messages and flow, said whole
in Redis's log, and removed by a ZREM carrying it (5.4 s of Redis for 50 MB). Watched
with MONITOR, which shows the commands scripts run: no command carries the member; the
group's own tasks are served in their order, one fetch at a time or several at once."""
from __future__ import annotations

import time
from typing import Any, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.monitored import carrying
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Longer than any member minitask writes (201 bytes), and easy to tell in MONITOR's lines.
LONG = [b"planted%d-" % i + b"q" * 2_000_000 for i in range(3)]
#: What MONITOR shows of a command that carries one of LONG.
MARK = b"q" * 1000
RANK = 100_000_000_000_000  # flow.lua's: orders below it, priorities above


def _planted(admin: "redis.Redis[bytes]", ready: str, index: int) -> bool:
    """Whether LONG[index] is in ``ready`` (asked so, a failure shows no 2 MB)."""
    return admin.zscore(ready, LONG[index]) is not None


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client())

    @app.task(group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        return n

    return app, job


def _served(app: Minitask, count: int, most: int) -> List[int]:
    """The ``n`` of each task fetches of ``count`` hand out (never acked), until one
    hands out none (``most`` fetches at most)."""
    order: List[int] = []
    for _ in range(most):
        deliveries = app.broker.queues.fetch(
            "default", now_ms=int(time.time() * 1000), lease_ms=60_000, count=count,
            max_deliveries=5).deliveries
        if not deliveries:
            break
        order += [delivery.message().args[1] for delivery in deliveries]
    return order


@pytest.mark.parametrize("count", [1, 4])
def test_long_ready_members_are_removed_by_rank_and_the_group_goes_on(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", count: int) -> None:
    app, job = _app(redis_server, f"fairlong{count}")
    ready = QueueKeys(app.name, "default").fair_group("G", "ready")
    try:
        # long members ahead of the group's tasks, and (once they join) between them and
        # after them: the ranks after a removal must still be right
        admin.zadd(ready, {LONG[0]: 1})
        carried, _ = carrying(redis_server, MARK, lambda: [job.delay("G", n) for n in range(3)])
        assert carried == []
        assert not _planted(admin, ready, 0)  # removed by the send that met it
        scores = sorted(score for _, score in admin.zrange(ready, 0, -1, withscores=True))
        admin.zadd(ready, {LONG[1]: (scores[0] + scores[1]) / 2, LONG[2]: 10 * RANK})
        carried, order = carrying(redis_server, MARK, lambda: _served(app, count, 10))
        assert carried == []
        assert order == [0, 1, 2]
        assert admin.exists(ready) == 0
    finally:
        app.close()


def test_many_members_one_byte_too_long_go_and_a_longest_id_stays(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """150 members of 202 bytes (one past a digit and a 200-byte id) ahead of the
    group's tasks: all removed by the calls that meet them; a task whose id is 200
    bytes long (its member 201) is the group's, and runs in its turn."""
    app, job = _app(redis_server, "fairlongmany")
    ready = QueueKeys(app.name, "default").fair_group("G", "ready")
    try:
        job.delay("G", 0)
        job.apply_async(("G", 1), task_id="i" * 200)
        job.delay("G", 2)
        admin.zadd(ready, {b"0%05d" % i + b"p" * 196: i for i in range(150)})
        assert _served(app, 1, 10) == [0, 1, 2]
        assert admin.exists(ready) == 0
    finally:
        app.close()
