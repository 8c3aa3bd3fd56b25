"""A broadcast queue's index of cursors (``bcast:places``) holding scores minitask
did not write, on a real redis-server (issue 29, probe 10: H2).

The cursors hash is the truth, the index only says who is least. A score that is
no call sequence (inf, -inf, 1e300, 1.5, -5) planted for a subscriber that has
pulled nothing must never let a send or another subscriber's pull delete a call
it has not pulled: it runs every call, so do the others, and another queue's calls
are dropped as usual. The index is set back to the cursor; a cursor that is itself
no sequence keeps every call until that subscriber pulls. ``alive`` scores that are
no time (inf, 1e300) keep no dead subscriber for ever, and -inf prunes no live one.
"""
from __future__ import annotations

import time
from typing import Any, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "places"
OTHER = "calm"
#: Scores minitask never writes in the index: non-finite, past every sequence,
#: a fraction, below 0.
PLANTED = ("inf", "-inf", "1e300", "1.5", "-5")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str, **options: Any) -> Tuple[Minitask, Any, Any]:
    app = Minitask(name, broker=redis_server.client(), **options)

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    @app.task(broadcast=True, queue=OTHER)
    def tock(n: int) -> int:
        return -n

    return app, tick, tock


def _drain(app: Minitask, queue: str, *names: str) -> None:
    """Each subscriber of ``names`` pulls and runs every call it has (a burst worker)."""
    for name in names:
        app.worker(queues=[queue], burst=True, subscriber=name).run()


def _plant(admin: "redis.Redis[bytes]", key: str, name: str, score: str) -> None:
    # redis-py formats floats itself (repr): ZADD takes the text as Redis reads it
    admin.execute_command("ZADD", key, score, name)


@pytest.mark.parametrize("score", PLANTED)
def test_a_foreign_place_loses_no_call_of_its_subscriber(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", score: str) -> None:
    """'victim' subscribed and pulled nothing (cursor 0); its index entry says
    ``score``. 'other' and 'third' pull calls 1-3 as they come (each pull deletes
    what every subscriber has pulled) and sends prune: none of the three calls
    leaves the log until 'victim' pulls, and then every subscriber has run every
    call. Queue 'calm' (the same subscribers, no foreign data) drops its calls."""
    app, tick, tock = _app(redis_server, "fp" + score.replace(".", "_"))
    k = QueueKeys(app.name, QUEUE)
    store = app.broker.broadcasts
    everyone = ("other", "third", "victim")
    try:
        for queue in (QUEUE, OTHER):
            for name in everyone:
                store.subscribe(queue, name, _now_ms())
        _plant(admin, k.broadcast("places"), "victim", score)
        handles = [tick.delay(1)]
        _drain(app, QUEUE, "other", "third")
        handles += [tick.delay(2), tick.delay(3)]
        _drain(app, QUEUE, "other", "third")
        calm = [tock.delay(n) for n in range(1, 4)]
        _drain(app, OTHER, *everyone)
        assert store.log_size(OTHER) == 0  # the other queue drops as usual
        assert store.log_size(QUEUE) == 3, "a call 'victim' has not pulled was deleted"
        assert admin.hget(k.broadcast("cursors"), "victim") == b"0"
        assert admin.zscore(k.broadcast("places"), "victim") == 0.0  # indexed again
        _drain(app, QUEUE, "victim")
        results: List[Any] = [h.join(timeout=30) for h in handles]
        assert results == [{name: n for name in everyone} for n in (1, 2, 3)]
        assert [h.join(timeout=30) for h in calm] == [
            {name: -n for name in everyone} for n in (1, 2, 3)]
        assert store.log_size(QUEUE) == 0  # every subscriber pulled them: deleted
    finally:
        app.close()


@pytest.mark.parametrize("score", ("inf", "1e300"))
def test_an_unreadable_cursor_behind_a_foreign_place_keeps_every_call(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", score: str) -> None:
    """'victim''s cursor is no sequence ('x') and its index entry ``score``: no
    call leaves the log while it subscribes so (it cannot be told what it pulled);
    its pull restarts from the oldest call logged and runs each."""
    app, tick, _ = _app(redis_server, "fu" + score)
    k = QueueKeys(app.name, QUEUE)
    store = app.broker.broadcasts
    try:
        for name in ("other", "victim"):
            store.subscribe(QUEUE, name, _now_ms())
        admin.hset(k.broadcast("cursors"), "victim", "x")
        _plant(admin, k.broadcast("places"), "victim", score)
        handles = [tick.delay(n) for n in (1, 2)]
        _drain(app, QUEUE, "other")
        handles.append(tick.delay(3))
        _drain(app, QUEUE, "other")
        assert store.log_size(QUEUE) == 3
        _drain(app, QUEUE, "victim")
        assert [h.join(timeout=30) for h in handles] == [
            {"other": n, "victim": n} for n in (1, 2, 3)]
        assert store.log_size(QUEUE) == 0
    finally:
        app.close()


def test_many_foreign_places_past_the_last_call_lose_nothing(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """Forty subscribers that pulled nothing, each index entry at inf (more than a
    script sets back at once): 'other' pulls the calls, none is deleted."""
    app, tick, _ = _app(redis_server, "fmany")
    k = QueueKeys(app.name, QUEUE)
    store = app.broker.broadcasts
    behind = [f"v{i:02d}" for i in range(40)]
    try:
        for name in ["other", *behind]:
            store.subscribe(QUEUE, name, _now_ms())
        for name in behind:
            _plant(admin, k.broadcast("places"), name, "inf")
        handles = [tick.delay(n) for n in (1, 2)]
        _drain(app, QUEUE, "other")
        handles.append(tick.delay(3))
        _drain(app, QUEUE, "other")
        assert store.log_size(QUEUE) == 3
        _drain(app, QUEUE, "v00", "v39")
        for handle, n in zip(handles, (1, 2, 3)):
            assert handle.join(timeout=30, subscribers=["v00", "v39"]) == {"v00": n, "v39": n}
    finally:
        app.close()


def test_alive_scores_that_are_no_time(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """``alive`` at inf or 1e300 (no time: a prune never found it stale) is aged from
    the server's clock by the next heartbeat of any subscriber, so a dead subscriber
    goes after broadcast_ttl; at -inf for a subscriber seen just now, it is not
    pruned, and one whose seen is no time either is aged from now by the prune (one
    more broadcast_ttl), not pruned with the calls it has not pulled."""
    app, tick, _ = _app(redis_server, "falive")
    k = QueueKeys(app.name, QUEUE)
    store = app.broker.broadcasts
    try:
        for name in ("ahead", "far", "live", "blank"):
            store.subscribe(QUEUE, name, _now_ms())
        _plant(admin, k.broadcast("alive"), "ahead", "inf")
        _plant(admin, k.broadcast("alive"), "far", "1e300")
        _plant(admin, k.broadcast("alive"), "live", "-inf")
        _plant(admin, k.broadcast("alive"), "blank", "-inf")
        admin.hset(k.broadcast("seen"), "blank", "inf")
        before = _now_ms()
        assert store.seen([QUEUE], "live", before) == []  # a heartbeat ages those ahead
        handle = tick.delay(1)  # a send prunes
        for name in ("ahead", "far", "blank"):
            alive = admin.zscore(k.broadcast("alive"), name)
            assert alive is not None and before - 1000 <= alive <= _now_ms() + 1000, name
        assert {c.name for c in app.subscribers(QUEUE)} == {"ahead", "far", "live", "blank"}
        _drain(app, QUEUE, "blank", "live")
        assert handle.join(timeout=30, subscribers=["blank", "live"]) == {"blank": 1, "live": 1}
    finally:
        app.close()
