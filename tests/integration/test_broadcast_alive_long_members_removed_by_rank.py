"""A member of a broadcast queue's ``alive`` longer than any subscriber name (issue 29:
planted, 50 MB) is removed by its rank where a prune (a send) or a heartbeat's aging
meets it, never passed back to Redis: the prune looked it up in ``seen`` and forgot it in
five keys (six commands carrying it: 1.5-1.9 s of Redis for 50 MB), and a heartbeat gave
it a new score (and kept it). Watched with MONITOR, which shows the commands scripts run:
no command carries the member; the subscribers beside it are pruned or aged as before."""
from __future__ import annotations

import time
from typing import Any, Callable, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "news"
#: Longer than any subscriber name (1,200 bytes), and easy to tell in MONITOR's lines.
LONG = [b"planted%d-" % i + b"q" * 2_000_000 for i in range(2)]
#: What MONITOR shows of a command that carries one of LONG.
MARK = b"q" * 1000
END = "end-of-test-commands"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _carrying(redis_server: RedisServer, act: Callable[[], None]) -> List[bytes]:
    """The commands (scripts' own included) that carry a LONG member while ``act`` runs:
    MONITOR's lines up to an ECHO sent after it."""
    watcher = redis_server.client(socket_timeout=60)
    other = redis_server.client()
    try:
        with watcher.monitor() as monitor:
            act()
            other.echo(END)
            seen: List[bytes] = []
            while True:
                line = monitor.connection.read_response()
                line = line if isinstance(line, bytes) else str(line).encode()
                if END.encode() in line:
                    return seen
                if MARK in line:
                    seen.append(line[:80])
    finally:
        watcher.close()
        other.close()


def test_a_prune_removes_long_stale_members_by_rank(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "alivelongprune")
    alive = QueueKeys(app.name, QUEUE).broadcast("alive")
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        tick.delay(0)
        app.broker.broadcasts.subscribe(QUEUE, "gone", _now_ms())
        # long, stale members on either side of a stale subscriber: the ranks after a
        # removal must still be right
        admin.zadd(alive, {LONG[0]: 1, b"gone": 2, LONG[1]: 3})
        admin.hset(QueueKeys(app.name, QUEUE).broadcast("seen"), "gone", 2)
        assert _carrying(redis_server, lambda: tick.delay(1)) == []
        assert admin.zscore(alive, LONG[0]) is None and admin.zscore(alive, LONG[1]) is None
        assert admin.zscore(alive, b"gone") is None  # pruned as before
        assert admin.zscore(alive, b"live") is not None
        assert set(admin.hkeys(QueueKeys(app.name, QUEUE).broadcast("cursors"))) == {b"live"}
    finally:
        app.close()


def test_a_heartbeat_removes_long_members_ahead_by_rank(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, _ = _app(redis_server, "alivelongahead")
    alive = QueueKeys(app.name, QUEUE).broadcast("alive")
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        admin.zadd(alive, {LONG[0]: 1e300, b"ahead": 1e301, LONG[1]: float("inf")})
        assert _carrying(redis_server,
                         lambda: app.broker.broadcasts.seen([QUEUE], "live", _now_ms())) == []
        assert admin.zscore(alive, LONG[0]) is None and admin.zscore(alive, LONG[1]) is None
        ahead = admin.zscore(alive, b"ahead")
        assert ahead is not None and ahead <= _now_ms() + 60_000  # aged from now as before
        assert admin.zscore(alive, b"live") is not None
    finally:
        app.close()
