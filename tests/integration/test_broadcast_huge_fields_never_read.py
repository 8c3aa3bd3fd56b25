"""A huge value planted in a field of a broadcast queue's state or cursors (issue 29,
section 3), on a real redis-server: no pull or send reads it whole again. One in
state is deleted by the first script that meets it (said in Redis's log) and read
as missing, so every later pull costs what it did; another subscriber's cursor is
read by its length only, and rewritten by its subscriber's next pull. A huge send
or seen time goes with its call or its subscriber at its first read. Calls keep
flowing to every subscriber."""
from __future__ import annotations

import time
from typing import Any, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.broadcast import Pulled
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "news"
#: Larger than any value minitask writes there (a number: 32 bytes at most).
HUGE = b"7" * 2_000_000
#: A number as Lua's tonumber() reads it (5), trailed by 2 MB of spaces.
SPACED = b"5" + b" " * 2_000_000
STATE_FIELDS = ("audit", "seq", "dropped", "maxlen", "ttl", "prune_ttl", "indexed", "scan")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _pull(app: Minitask, name: str) -> Pulled:
    store = app.broker.broadcasts
    reply = app.broker.transport.run_calls([store.pull_call(QUEUE, name, 10, _now_ms())],
                                           "pull")[0]
    return store.pulled(reply)


def _run(app: Minitask, name: str) -> None:
    """The subscriber's worker runs what its lane holds (a burst worker)."""
    app.worker(queues=[QUEUE], burst=True, subscriber=name).run()


@pytest.mark.parametrize("field", STATE_FIELDS)
@pytest.mark.parametrize("value", [HUGE, SPACED], ids=["digits", "spaced"])
def test_a_huge_state_field_is_deleted_at_its_first_read(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", field: str,
        value: bytes) -> None:
    app, tick = _app(redis_server, "huge" + field.replace("_", "") + str(len(value)))
    k = QueueKeys(app.name, QUEUE)
    state = k.broadcast("state")
    try:
        for name in ("sub1", "sub2"):
            app.broker.broadcasts.subscribe(QUEUE, name, _now_ms())
        tick.delay(1)
        admin.hset(state, field, value)
        if field == "scan":  # read while cursors are indexed again (an older minitask's)
            admin.hdel(state, "indexed")
        pulled = [_pull(app, "sub1").pulled, _pull(app, "sub2").pulled]
        tick.delay(2)  # a send meets what is left
        pulled += [_pull(app, "sub1").pulled, _pull(app, "sub2").pulled]
        assert admin.hstrlen(state, field) <= 32
        assert sum(pulled) >= 3  # calls flow (a seq deleted may re-send one: at least once)
    finally:
        app.close()


def test_huge_sent_and_seen_fields_go_at_their_first_read(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "hugesent")
    k = QueueKeys(app.name, QUEUE)
    try:
        for name in ("sub1", "sub2"):
            app.broker.broadcasts.subscribe(QUEUE, name, _now_ms())
        handle = tick.delay(1)
        admin.hset(k.broadcast("sent"), handle.id, HUGE)
        # sub2 not seen for long: pruned by a send, whose seen is read
        admin.hset(k.broadcast("seen"), "sub2", HUGE)
        admin.zadd(k.broadcast("alive"), {"sub2": 1})
        tick.delay(2)
        _pull(app, "sub1")
        assert admin.hstrlen(k.broadcast("sent"), handle.id) <= 32
        assert admin.hstrlen(k.broadcast("seen"), "sub2") <= 32
    finally:
        app.close()


def test_another_subscribers_huge_cursor_is_set_to_0_at_its_first_read(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """'sub2''s cursor is planted huge: the first of 'sub1''s pulls to read it (its
    check of the least cursor) sets it to 0, so no later pull reads it again; sub2
    then pulls every call still logged (at least once), and both run them."""
    app, tick = _app(redis_server, "hugecursor")
    k = QueueKeys(app.name, QUEUE)
    try:
        for name in ("sub1", "sub2"):
            app.broker.broadcasts.subscribe(QUEUE, name, _now_ms())
        tick.delay(1)
        admin.hset(k.broadcast("cursors"), "sub2", HUGE)
        tick.delay(2)
        assert _pull(app, "sub1").pulled == 2
        assert admin.hget(k.broadcast("cursors"), "sub2") == b"0"
        assert _pull(app, "sub2").pulled == 2
        _run(app, "sub1")
        _run(app, "sub2")
    finally:
        app.close()


def test_a_subscribers_own_huge_cursor_restarts_it_and_is_rewritten(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "hugeown")
    k = QueueKeys(app.name, QUEUE)
    try:
        app.broker.broadcasts.subscribe(QUEUE, "sub1", _now_ms())
        tick.delay(1)
        admin.hset(k.broadcast("cursors"), "sub1", b"5" + b" " * 2_000_000)  # tonumber: 5
        pulled = _pull(app, "sub1")
        assert "2000001 bytes" in pulled.note and "no call sequence" in pulled.note
        assert admin.hstrlen(k.broadcast("cursors"), "sub1") <= 32
    finally:
        app.close()
