"""Members of the app's registries (queues, lanes, workers) and of a broadcast queue's
subscriber indexes longer than any name minitask writes there are removed by the first
listing that meets them, never sent, and said once with their true length (issue 29,
probe 29e's lows), on the suite's redis-server.

Such a member was counted (the queue registry, ``bcast:places``) or cut to 1,201 bytes
(the worker registry) inside Redis at every listing, never removed: each ``minitask
status``, dashboard page or scrape copied it again (0.2-0.6 s of Redis for 50 MB, for
ever), and the workers' warning said "(1201 long)" for a 52 MB member. Now the listing
scripts (names_page.lua, workers_page.lua, broadcast_page.lua) remove it there (SREM,
ZREM, HDEL: lib.lua's bounded_members). Costs are bytes Redis sends (INFO's
total_net_output_bytes) and its command counts, never time.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, lane, queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.broadcast_reads import EMPTY_PAGES
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
KEYS = AppKeys("foreign")
NEWS = queue_keys("foreign", "news")
SIZE = 5 << 20
#: What one status, one page or one scrape here may make Redis send at most.
MOST = 200_000


def sent(admin: Any) -> int:
    return int(admin.info("stats")["total_net_output_bytes"])


def lines(caplog: pytest.LogCaptureFixture, key: str) -> List[str]:
    return [record.getMessage() for record in caplog.records if key in record.getMessage()]


def look_everywhere(app: Minitask) -> str:
    """A status, the dashboard's home, workers and subscribers pages and a scrape, each
    answering without a traceback; what status printed."""
    code, out = cli("status", "-A", APP)
    assert code == 0 and "Traceback" not in out, out[-2000:]
    dashboard = Dashboard(app)
    for path in ("/", "/workers", "/section/subscribers", "/metrics"):
        status, body = get(dashboard, path)
        assert status == "200 OK" and "Traceback" not in body, (path, body[:2000])
    return out


def test_an_overlong_member_of_the_queue_or_lane_registry_is_removed_once(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    admin.sadd(KEYS.queues, "other", "extra", b"Q" * SIZE)
    admin.sadd(KEYS.lanes, lane("news", "sub1"), b"L" * SIZE)
    before = sent(admin)
    out = look_everywhere(app)
    assert "extra" in out, out
    assert sent(admin) - before < MOST
    assert admin.smembers(KEYS.queues) == {b"other", b"extra"}
    assert admin.smembers(KEYS.lanes) == {lane("news", "sub1").encode()}
    for key in (KEYS.queues, KEYS.lanes):
        said = lines(caplog, key)
        assert len(said) == 1 and f"a member of {SIZE:,} bytes" in said[0], said
    assert "Q" * 100 not in caplog.text and "L" * 100 not in caplog.text
    caplog.clear()
    admin.config_resetstat()
    look_everywhere(app)
    assert "cmdstat_srem" not in admin.info("commandstats")
    assert KEYS.queues not in caplog.text and KEYS.lanes not in caplog.text


def test_an_async_lookup_removes_an_overlong_registry_member(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    admin.sadd(KEYS.queues, "other", "extra", b"Q" * SIZE)

    async def names() -> List[str]:
        broker = app.async_broker()
        try:
            return await broker.queue_names()
        finally:
            await broker.close()

    before = sent(admin)
    assert {"other", "extra"} <= set(asyncio.run(names()))
    assert sent(admin) - before < MOST
    assert admin.smembers(KEYS.queues) == {b"other", b"extra"}
    said = lines(caplog, KEYS.queues)
    assert len(said) == 1 and f"a member of {SIZE:,} bytes" in said[0], said


def test_a_lane_of_two_long_non_ascii_names_is_listed_and_kept(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """The registries' bound is a lane's (two names of 300 characters of up to 4 bytes
    and a colon): such a lane, 1,801 bytes, is a name minitask writes, never removed."""
    long_lane = lane("\u961f" * 300, "\u5217" * 300)
    admin.sadd(KEYS.lanes, long_lane)
    assert long_lane in app.broker.queues.queue_names()
    assert admin.sismember(KEYS.lanes, long_lane)


def test_an_overlong_member_of_the_worker_registry_is_removed_once(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    now_ms = int(time.time() * 1000)
    admin.zadd(KEYS.workers, {"goodworker": now_ms, "aheadworker": now_ms + 3_600_000})
    for name in ("goodworker", "aheadworker"):
        admin.hset(KEYS.worker(name), mapping={"name": name, "beat_ms": now_ms})
    admin.zadd(KEYS.workers, {b"A" * SIZE: now_ms, b"D" * SIZE: float("inf")})
    before = sent(admin)
    out = look_everywhere(app)
    assert "goodworker" in out and "aheadworker" in out, out
    # counted neither live nor ahead: removed, not "left out"
    assert "1 live worker(s)" in out and "more in the worker registry" not in out, out
    assert "1 worker record(s) with a heartbeat more than" in out, out
    assert sent(admin) - before < MOST
    assert set(admin.zrange(KEYS.workers, 0, -1)) == {b"goodworker", b"aheadworker"}
    said = lines(caplog, KEYS.workers)
    # the one scored +inf is removed by its score (no heartbeat a worker writes: probe
    # 29h, L3), the other by its length: one line each, the true length, not a cut one
    assert len(said) == 2, said
    assert "1 member(s) scored past the year 9999" in said[0], said
    assert f"{SIZE:,} bytes" in said[1], said
    assert "1201 long" not in caplog.text and "A" * 100 not in caplog.text
    caplog.clear()
    admin.config_resetstat()
    look_everywhere(app)
    assert "cmdstat_zrem" not in admin.info("commandstats")
    assert KEYS.workers not in caplog.text


@pytest.mark.parametrize("where", ["places", "since", "cursors"])
def test_an_overlong_subscriber_index_member_is_removed_once(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture,
        where: str) -> None:
    now_ms = int(time.time() * 1000)
    for sub in ("sub1", "sub2"):
        app.broker.broadcasts.subscribe("news", sub, now_ms)
    handle = app.tasks["hear"].delay(1)
    key = NEWS.broadcast(where)
    if where == "cursors":
        admin.hset(key, b"C" * SIZE, 0)
    else:  # the first by rank (places) and subscribed first (since)
        admin.zadd(key, {b"Z" * SIZE: 0})
    reads: List[Callable[[], Any]] = [lambda: look_everywhere(app),
                                      lambda: app.subscribers("news"), handle.status,
                                      handle.subscribers]
    before = sent(admin)
    for read in reads:
        read()
    assert sent(admin) - before < 4 * MOST
    assert sorted(s.name for s in app.subscribers("news")) == ["sub1", "sub2"]
    assert sorted(handle.subscribers()) == ["sub1", "sub2"]
    if where == "cursors":
        assert set(admin.hkeys(key)) == {b"sub1", b"sub2"}
    else:
        assert set(admin.zrange(key, 0, -1)) == {b"sub1", b"sub2"}
    said = lines(caplog, key)
    assert len(said) == 1 and f"a member of {SIZE:,} bytes" in said[0], said
    caplog.clear()
    admin.config_resetstat()
    for read in reads:
        read()
    stats = admin.info("commandstats")
    assert "cmdstat_zrem" not in stats and "cmdstat_hdel" not in stats
    assert key not in caplog.text


def test_a_short_listing_goes_on_past_removed_places_members(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A page of ``bcast:places`` short only because overlong members were removed was
    read as the last: a listing of two left out the subscribers after them (one page
    of them alone listed none)."""
    now_ms = int(time.time() * 1000)
    for sub in ("sub1", "sub2"):
        app.broker.broadcasts.subscribe("news", sub, now_ms)
    places = NEWS.broadcast("places")
    for planted in (1, 2):  # a page part removed, then a page of removed members alone
        admin.zadd(places, {bytes([64 + n]) * 2000: -1 for n in range(planted)})
        rows, count = app.broker.broadcasts.few("news", 2)
        assert sorted(row.name for row in rows) == ["sub1", "sub2"] and count == 2, planted
        assert admin.zcard(places) == 2


def test_a_short_listing_ends_when_redis_refuses_the_removals(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    """Redis refusing the removal (a replica; here an ACL without ZREM), the members
    are read again: each subscriber is listed once, and pages of refused members alone
    end the listing (a bounded number of reads)."""
    now_ms = int(time.time() * 1000)
    for sub in ("sub1", "sub2"):
        app.broker.broadcasts.subscribe("news", sub, now_ms)
    places = NEWS.broadcast("places")
    admin.zadd(places, {b"A" * 2000: -1})
    admin.acl_setuser("nozrem-b", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zrem"])
    reader = build(f"redis://nozrem-b:pw@127.0.0.1:{redis_server.port}/0")
    try:
        rows, _ = reader.broker.broadcasts.few("news", 2)
        assert sorted(row.name for row in rows) == ["sub1", "sub2"]
        admin.zadd(places, {bytes([66 + n]) * 2000: -1 for n in range(3)})
        admin.config_resetstat()
        rows, _ = reader.broker.broadcasts.few("news", 2)
        assert rows == []  # pages of refused members alone: none listed, and an end
        calls = int(admin.info("commandstats")["cmdstat_evalsha"]["calls"])
        assert calls <= EMPTY_PAGES + 2, calls
    finally:
        reader.close()
        admin.acl_deluser("nozrem-b")
    assert admin.zcard(places) == 6
