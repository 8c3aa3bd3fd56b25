"""What no minitask writes in a queue's schedules, ticks or record of recent outcomes
costs one listing, not every one (issue 29, probe 29e's M and L).

A 50 MB field *name* planted in a ``schedules`` hash was sent whole by every
``minitask schedules`` and dashboard /schedules (schedule_page.lua's HSCAN bounded
the record, never the name); a huge schedule record, or a huge entry of ``recent``,
was read inside Redis by every listing (0.2-0.4 s each) for as long as it stayed.
Now the listing that meets one takes it out there, unsent: a field name longer than
any schedule's (periodic.MAX_NAME_BYTES, a bound fixed in code) is deleted with its
record, a tick's name as long is removed, an overlong recent entry is deleted; each is
said once, by its length, never its content. A record longer than the reading app
writes is never taken out (an app allowing larger messages writes one, and its workers
fire it: review of fix29sched, which set it aside): listed as too large, left in place.
Costs are Redis's bytes sent and its command counts, never wall time.

A real redis-server, the app of tests.apps.foreign, plants of 5 MB and 3 MB.
"""
from __future__ import annotations

import logging
import time
from typing import Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_listing, schedule_page
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.recent import pack_entry
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
K = queue_keys("foreign", "other")
SIZE = 5 << 20
#: Longer than any record the app writes (its max_message_bytes, 1 MiB, and room).
BIG = 3_000_000
#: What the listings of one step may make Redis send, in all (one plant is 3-5 MB).
MOST_SENT = 500_000


def _mark(token: str) -> None:
    """A task of the writer app's (never run here)."""


def sent_and_calls(admin: "redis.Redis[bytes]", *commands: str) -> Tuple[int, ...]:
    """Bytes Redis has sent so far, and how many times it ran each of ``commands``
    (scripts' calls included)."""
    stats = admin.info("commandstats")
    return (int(admin.info("stats")["total_net_output_bytes"]),
            *(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in commands))


def listings() -> None:
    """``minitask schedules`` (table and JSON) and the dashboard's schedules pages:
    each answers, and none shows a planted name."""
    for argv in (("schedules", "-A", APP), ("schedules", "-A", APP, "--json")):
        code, said = cli(*argv)
        assert code == 0 and "Traceback" not in said, said[-3000:]
        assert "good-schedule" in said, said[-3000:]
        assert "nnnnnnnnnn" not in said and "tttttttttt" not in said
    dashboard = Dashboard(build())
    for path in ("/schedules", "/api/schedules"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
        assert "good-schedule" in body and "nnnnnnnnnn" not in body


def test_a_planted_overlong_schedule_name_is_removed_unsent_and_said_once(
        app: Minitask, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    app.add_schedule("good-schedule", "mark", every=3600.0, args=("s",))
    tick = int(time.time() * 1000) + 60_000  # before good-schedule's: listed first
    admin.hset(K.schedules, b"n" * SIZE, b"junk")  # a field name, no tick
    admin.zadd(K.ticks, {b"t" * SIZE: tick})  # a tick's name, no record
    before = sent_and_calls(admin)[0]
    listings()
    sent = sent_and_calls(admin)[0] - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"  # 5 MB a listing before
    assert admin.hlen(K.schedules) == 1 and admin.zcard(K.ticks) == 1  # good-schedule's
    assert admin.hexists(K.schedules, "good-schedule")
    lines = [record.getMessage() for record in caplog.records]
    for key in (K.schedules, K.ticks):
        told = [line for line in lines if key + ":" in line and f"{SIZE:,} bytes" in line]
        assert len(told) == 1, lines  # once, by its length
    assert not any("nnnnnnnnnn" in line or "tttttttttt" in line for line in lines)
    # gone: the next listings remove nothing and send what any does
    before, hdel, zrem = sent_and_calls(admin, "hdel", "zrem")
    listings()
    after, hdel_after, zrem_after = sent_and_calls(admin, "hdel", "zrem")
    assert (hdel_after, zrem_after) == (hdel, zrem)
    assert after - before < MOST_SENT


def test_a_schedule_record_too_long_is_listed_unread_and_left_in_place(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """Longer than the reading app writes: listed as too large, never sent, and left
    where it is, armed or not (the set-aside of fix29sched took it from its workers)."""
    app.add_schedule("good-schedule", "mark", every=3600.0, args=("s",))
    planted = {"unarmed-big": b"\x81" * BIG, "armed-big": b"\x82" * BIG}
    admin.hset(K.schedules, mapping=planted)
    admin.zadd(K.ticks, {"armed-big": int(time.time() * 1000) + 60_000})
    before, hdel, hset = sent_and_calls(admin, "hdel", "hset")
    for _ in range(2):
        code, said = cli("schedules", "-A", APP)
        assert code == 0 and "good-schedule" in said, said
        for name in planted:
            assert f"field '{name}' is too large (3,000,000 bytes" in said, said
        listings()
    after, hdel_after, hset_after = sent_and_calls(admin, "hdel", "hset")
    assert after - before < 4 * MOST_SENT  # never sent
    assert (hdel_after, hset_after) == (hdel, hset)  # nothing moved nor deleted
    for name, value in planted.items():
        assert admin.hexists(K.schedules, name) and admin.hget(K.schedules, name) == value
    assert admin.zscore(K.ticks, "armed-big") is not None
    assert not admin.keys("*schedules_aside*")


def test_a_larger_apps_schedule_outlives_a_smaller_apps_listing(
        app: Minitask, redis_server: RedisServer) -> None:
    """The reviewer's case: an app allowing 4 MB messages writes a schedule of a 2 MB
    argument; an app of the default 1 MB lists the schedules. Before, that listing set
    the record aside: the writer's listing, and its workers, lost it for good."""
    writer = Minitask("foreign", broker=redis_server.url, max_message_bytes=4 << 20)
    writer.task(queue="other", name="mark")(_mark)
    try:
        writer.add_schedule("nightly", "mark", every=86_400.0, args=("x" * 2_000_000,))
        assert [schedule.name for schedule in writer.schedules()] == ["nightly"]
        assert app.schedules() == []  # too large for the reader
        assert [schedule.name for schedule in writer.schedules()] == ["nightly"]
        listed, unreadable = schedule_listing(app)  # listed as too large, each time
        assert not listed and [row["field"] for row in unreadable] == ["nightly"]
        assert "too large (2,0" in unreadable[0]["problem"], unreadable
        # what the writer's workers read: the schedule, readable, still armed
        armed = writer.broker.schedules.armed(
            ["other"], longest=writer.broker.schedules.longest_record())["other"]
        assert [(entry.name, entry.schedule is not None, entry.tick_ms is not None)
                for entry in armed] == [("nightly", True, True)]
    finally:
        writer.close()


def test_a_huge_recent_entry_is_removed_by_the_listing_that_meets_it(
        app: Minitask, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    now_ms = int(time.time() * 1000)
    admin.xadd(K.recent, {"e": pack_entry("good-early", "mark", "succeeded", now_ms, 1, 0.5,
                                          "w1", "")})
    admin.xadd(K.recent, {"e": b"\x99" * BIG})  # a huge entry
    admin.xadd(K.recent, {"e": b"\x90", "x": b"y" * BIG})  # huge beside a small e
    admin.xadd(K.recent, {"e": pack_entry("good-late", "mark", "dead", now_ms, 1, 0.5, "w1",
                                          "ValueError: no")})
    before = sent_and_calls(admin)[0]
    code, said = cli("inspect", "-A", APP, "recent")
    assert code == 0 and "good-early" in said and "good-late" in said, said
    assert sent_and_calls(admin)[0] - before < MOST_SENT
    assert admin.xlen(K.recent) == 2  # the good ones kept
    lines = [record.getMessage() for record in caplog.records
             if K.recent in record.getMessage() and "removed" in record.getMessage()]
    assert len(lines) == 2, lines
    # gone: the next listings delete nothing and read only the good entries
    assert int(admin.memory_usage(K.recent) or 0) < 10_000
    before, xdel = sent_and_calls(admin, "xdel")
    code, said = cli("inspect", "-A", APP, "recent")
    assert code == 0 and "good-early" in said and "good-late" in said, said
    for path in ("/recent", "/api/recent"):
        status, body = get(Dashboard(app), path)
        assert status.startswith("200") and "good-late" in body, (path, status)
    after, xdel_after = sent_and_calls(admin, "xdel")
    assert xdel_after == xdel and after - before < MOST_SENT


def test_the_armed_pages_go_on_past_removed_ticks(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A page of ticks all too long to be names read as the end of the armed
    schedules (fewer entries than asked): the armed ones after it were never listed."""
    good = [f"good-{index}" for index in range(3)]
    for name in good:
        app.add_schedule(name, "mark", every=3600.0, args=("s",))
    soon = int(time.time() * 1000) + 60_000  # before the good ones' ticks
    admin.zadd(K.ticks, {bytes([65 + index]) * 1000: soon for index in range(3)})
    counts = schedule_counts(app, ["other"])
    listed: list = []
    after = None
    for _ in range(10):  # the pages, walked by their next (bounded: 4 at most here)
        page = schedule_page(app, counts, after, 3)
        listed += [schedule.name for schedule in page.schedules]
        after = page.next
        if after is None:
            break
    assert after is None and sorted(listed) == good, listed
    assert admin.zcard(K.ticks) == 3


def test_the_armed_pages_go_on_past_ticks_whose_removal_redis_refuses(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    """A replica (here an ACL without ZREM) refuses the removal of overlong ticks: a
    page of them alone gave its own place as the next, read again until the page's
    PAGE_CALLS; the armed schedules after them were never listed. Two ticks start
    alike past the longest name: both are passed."""
    good = [f"good-{index}" for index in range(3)]
    for name in good:
        app.add_schedule(name, "mark", every=3600.0, args=("s",))
    soon = int(time.time() * 1000) + 60_000  # before the good ones' ticks
    planted = [b"A" * 1000, b"B" * 1000, b"B" * 999 + b"C", b"C" * 1000]
    admin.zadd(K.ticks, {name: soon for name in planted})
    admin.acl_setuser("nozrem", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zrem"])
    reader = build(f"redis://nozrem:pw@127.0.0.1:{redis_server.port}/0")
    try:
        counts = schedule_counts(reader, ["other"])
        listed: list = []
        after = None
        for _ in range(10):  # the pages, walked by their next (bounded)
            page = schedule_page(reader, counts, after, 2)
            listed += [schedule.name for schedule in page.schedules]
            after = page.next
            if after is None:
                break
        assert after is None and sorted(listed) == good, listed
    finally:
        reader.close()
        admin.acl_deluser("nozrem")
    assert admin.zcard(K.ticks) == 3 + len(planted)  # refused: all still there
