"""A member of a broadcast queue's ``alive`` longer than any subscriber name (issue 29:
planted, 50 MB) is removed by its rank where a prune (a send) or a heartbeat's aging
meets it, never passed back to Redis: the prune looked it up in ``seen`` and forgot it in
five keys (six commands carrying it: 1.5-1.9 s of Redis for 50 MB), and a heartbeat gave
it a new score (and kept it). Watched with MONITOR, which shows the commands scripts run:
no command carries the member; the subscribers beside it are pruned or aged as before."""
from __future__ import annotations

import pytest
import redis

from minitask.broker.keys import QueueKeys
from tests.support.broadcasts import now_ms, tick_app
from tests.support.monitored import carrying
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "news"
#: Longer than any subscriber name (1,200 bytes), and easy to tell in MONITOR's lines.
LONG = [b"planted%d-" % i + b"q" * 2_000_000 for i in range(2)]
#: What MONITOR shows of a command that carries one of LONG.
MARK = b"q" * 1000


def _removed_beside(admin: "redis.Redis[bytes]", alive: str) -> None:
    """Both LONG members are gone from ``alive``; the live subscriber stays."""
    assert admin.zscore(alive, LONG[0]) is None and admin.zscore(alive, LONG[1]) is None
    assert admin.zscore(alive, b"live") is not None


def test_a_prune_removes_long_stale_members_by_rank(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = tick_app(redis_server, "alivelongprune", QUEUE)
    alive = QueueKeys(app.name, QUEUE).broadcast("alive")
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", now_ms())
        tick.delay(0)
        app.broker.broadcasts.subscribe(QUEUE, "gone", now_ms())
        # long, stale members on either side of a stale subscriber: the ranks after a
        # removal must still be right
        admin.zadd(alive, {LONG[0]: 1, b"gone": 2, LONG[1]: 3})
        admin.hset(QueueKeys(app.name, QUEUE).broadcast("seen"), "gone", 2)
        assert carrying(redis_server, MARK, lambda: tick.delay(1))[0] == []
        _removed_beside(admin, alive)
        assert admin.zscore(alive, b"gone") is None  # pruned as before
        assert set(admin.hkeys(QueueKeys(app.name, QUEUE).broadcast("cursors"))) == {b"live"}
    finally:
        app.close()


def test_a_heartbeat_removes_long_members_ahead_by_rank(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, _ = tick_app(redis_server, "alivelongahead", QUEUE)
    alive = QueueKeys(app.name, QUEUE).broadcast("alive")
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", now_ms())
        admin.zadd(alive, {LONG[0]: 1e300, b"ahead": 1e301, LONG[1]: float("inf")})
        carried, _ = carrying(redis_server, MARK,
                              lambda: app.broker.broadcasts.seen([QUEUE], "live", now_ms()))
        assert carried == []
        _removed_beside(admin, alive)
        ahead = admin.zscore(alive, b"ahead")
        assert ahead is not None and ahead <= now_ms() + 60_000  # aged from now as before
    finally:
        app.close()
