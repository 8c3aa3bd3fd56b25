"""REVIEW10 of the broadcast index and prune, against the suite's real redis-server:
an index entry the previous version left behind (its ``minitask unsubscribe`` deleted
the cursor from the hash only) never lets a send or pull delete calls a cursor the
index lacks still needs (F1), nor lets join() leave that subscriber out (F5); a
``seen`` in the future keeps no dead subscriber for ever (F2)."""
from __future__ import annotations

import time
from typing import Any, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "rv10"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str, **options: Any) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client(), **options)

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _previous_version(admin: "redis.Redis[bytes]", k: QueueKeys, gone: str, new: str) -> None:
    """What the previous version (b47a35c) does: ``minitask unsubscribe gone`` deletes
    it from the hashes only, and a worker of ``new`` subscribes to the hashes only,
    from the last call sent: the cursors and the index then count the same."""
    admin.hdel(k.broadcast("cursors"), gone)
    admin.hdel(k.broadcast("seen"), gone)
    seq = int(admin.hget(k.broadcast("state"), "seq") or 0)
    admin.hset(k.broadcast("cursors"), new, seq)
    admin.hset(k.broadcast("seen"), new, _now_ms())


def test_a_stale_first_index_entry_lets_no_call_a_hidden_cursor_needs_go(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """F1: 'zombie' (cursor 1) comes first in the index once the previous version
    unsubscribed it; 'old' subscribed with that version after call 1, so the index
    lacks it though the counts agree. 'live' pulls calls 2-4: none is deleted, and
    'old' then runs each of them."""
    app, tick = _app(redis_server, "rv10f1")
    k = QueueKeys("rv10f1", QUEUE)
    store = app.broker.broadcasts
    try:
        store.subscribe(QUEUE, "live", _now_ms())
        store.subscribe(QUEUE, "zombie", _now_ms())
        tick.delay(0)  # a send: the scan of the cursors comes back to 0, indexed
        for name in ("live", "zombie"):
            app.worker(queues=[QUEUE], burst=True, subscriber=name).run()
        assert admin.hget(k.broadcast("state"), "indexed") == b"1"
        _previous_version(admin, k, "zombie", "old")
        assert admin.hlen(k.broadcast("cursors")) == admin.zcard(k.broadcast("places")) == 2
        handles = [tick.delay(n) for n in range(1, 4)]
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert store.log_size(QUEUE) == 3  # 'old' has pulled none of them
        app.worker(queues=[QUEUE], burst=True, subscriber="old").run()
        assert [h.join(timeout=10, subscribers=["old"]) for h in handles] == [
            {"old": 1}, {"old": 2}, {"old": 3}]
        assert store.log_size(QUEUE) == 0
    finally:
        app.close()


def test_join_names_a_subscriber_an_index_entry_left_behind_hides(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """F5: the same data while 'live' (a name before 'zombie') still comes first in
    the index, so no script has found the stale entry yet: the call sent next is
    for 'old' too, and join() names it."""
    app, tick = _app(redis_server, "rv10f5")
    k = QueueKeys("rv10f5", QUEUE)
    store = app.broker.broadcasts
    try:
        store.subscribe(QUEUE, "live", _now_ms())
        store.subscribe(QUEUE, "zombie", _now_ms())
        tick.delay(0)
        for name in ("live", "zombie"):
            app.worker(queues=[QUEUE], burst=True, subscriber=name).run()
        _previous_version(admin, k, "zombie", "old")
        handle = tick.delay(1)
        assert admin.hget(k.broadcast("state"), "indexed") == b"1"
        assert "old" in (store.names(QUEUE, handle.id) or [])
        app.worker(queues=[QUEUE], burst=True, subscriber="old").run()
        assert handle.join(timeout=10, subscribers=["old"]) == {"old": 1}
    finally:
        app.close()


def test_a_seen_in_the_future_keeps_no_dead_subscriber(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """F2: the heartbeat of a worker whose clock runs a year ahead records it alive
    on the server's clock (it wrote its own: the subscriber stayed a year after it
    died); a subscriber not alive for two hours whose seen says year 9999 is pruned
    (a prune re-scored alive to that seen, for ever)."""
    app, tick = _app(redis_server, "rv10f2", broadcast_ttl=60.0)
    k = QueueKeys("rv10f2", QUEUE)
    store = app.broker.broadcasts
    try:
        now = _now_ms()
        store.subscribe(QUEUE, "live", now)
        store.subscribe(QUEUE, "ahead", now)
        tick.delay(0)
        assert store.seen([QUEUE], "ahead", now + 365 * 86_400_000) == []
        alive = admin.zscore(k.broadcast("alive"), "ahead")
        assert alive is not None and alive <= _now_ms() + 1000
        assert admin.hget(k.broadcast("seen"), "ahead") == str(now + 365 * 86_400_000).encode()
        # planted: alive two hours ago, seen at the highest score minitask writes
        admin.zadd(k.broadcast("alive"), {"dead": now - 7_200_000})
        admin.hset(k.broadcast("cursors"), "dead", 1)
        admin.zadd(k.broadcast("places"), {"dead": 1})
        admin.zadd(k.broadcast("since"), {"dead": 0})
        admin.hset(k.broadcast("seen"), "dead", 2534023007999999)
        tick.delay(1)  # a send prunes
        assert admin.zscore(k.broadcast("alive"), "dead") is None
        assert {cursor.name for cursor in app.subscribers(QUEUE)} == {"live", "ahead"}
    finally:
        app.close()


def test_a_refused_heartbeat_key_is_named(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """The heartbeat's script says which key Redis refused (another's data)."""
    app, _ = _app(redis_server, "rv10hb")
    k = QueueKeys("rv10hb", QUEUE)
    try:
        admin.set(k.broadcast("alive"), "someone's")
        refused = app.broker.broadcasts.seen([QUEUE], "w", _now_ms())
        assert len(refused) == 1 and refused[0].startswith(k.broadcast("alive") + " (")
        assert admin.hget(k.broadcast("seen"), "w") is not None
    finally:
        app.close()
