"""The names index the schedule listings page stays sound, bounded and read-only where
it must (issue 29, review of the schedule_names index).

``ZRANGE BYLEX`` is defined only when every member of schedule_names has one score:
a planted name of score 5 ended the pages of 50 after 50 (and ``app.schedules()``
listed 500 of 700), one of -1 repeated the same page for ever. Every page now checks
the scores (ZCOUNT against ZCARD) and removes those of another score, said once.
Naming an older minitask's hash was one HKEYS and a ZADD per record in one call
(300,000 records: 8.5 s, past lua-time-limit): now at most a page's worth of names a
call past a bound. Where Redis refuses the names (an ACL without ZADD, as a replica),
no listing copies every name (HKEYS) before scanning: a no-op ZADD is tried first.
Costs are Redis's command counts, never wall time. A real redis-server.
"""
from __future__ import annotations

from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_page
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.schedule_walk import walk
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

K = queue_keys("foreign", "other")


def calls(admin: "redis.Redis[bytes]", command: str) -> int:
    stats = admin.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def unarmed(app: Minitask, admin: "redis.Redis[bytes]", count: int) -> List[str]:
    names = [f"s{index:04d}" for index in range(count)]
    for name in names:
        app.add_schedule(name, "mark", every=3600.0, args=("s",))
    admin.delete(K.ticks)
    return names


def test_a_name_of_another_score_is_removed_and_every_schedule_listed(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    names = unarmed(app, admin, 300)
    admin.zadd(K.schedule_names, {"0": 5})  # a name no record has, of score 5
    listed = walk(app, 50)
    assert sorted(listed) == names
    assert admin.zcount(K.schedule_names, 0, 0) == admin.zcard(K.schedule_names) == 300
    admin.zadd(K.schedule_names, {"s0150": 7})  # planted mid-listing: each page checks
    counts = schedule_counts(app, ["other"])
    first = schedule_page(app, counts, None, 100)
    assert first.next is not None
    listed = [s.name for s in first.schedules]
    admin.zadd(K.schedule_names, {"s0000": -3, "s0299": 9})
    listed += walk(app, 100, after=first.next, counts=counts)
    assert set(names) - set(listed) <= {"s0000", "s0299"}  # removed from the index after
    assert len(listed) == len(set(listed))
    assert sorted(walk(app, 50)) == names  # named again, in order


def test_a_negative_score_never_repeats_a_page(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    names = unarmed(app, admin, 60)
    admin.hset(K.schedules, "z", b"junk")
    admin.zadd(K.schedule_names, {"z": -1})
    listed = walk(app, 50)
    assert sorted(listed) == sorted([*names, "z"]) and len(listed) == 61


def test_the_schedules_of_the_app_are_all_listed(app: Minitask,
                                                 admin: "redis.Redis[bytes]") -> None:
    unarmed(app, admin, 700)
    admin.zadd(K.schedule_names, {"0": 5})
    assert len(app.schedules()) == 700


def test_where_off_scores_cannot_be_removed_the_records_are_scanned(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    names = unarmed(app, admin, 30)
    admin.zadd(K.schedule_names, {"s0010": 4})
    admin.acl_setuser("noremove", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zremrangebyscore"])
    reader = build(f"redis://noremove:pw@127.0.0.1:{redis_server.port}/0")
    try:
        listed = walk(reader, 7)
    finally:
        reader.close()
        admin.acl_deluser("noremove")
    assert sorted(listed) == names


def test_a_large_unnamed_hash_is_named_a_page_at_a_time(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """An older minitask's 12,000 records: no HKEYS of them all in one call; the first
    page names at most what it read, a walk names them all, the next pages by name."""
    app.add_schedule("model", "mark", every=3600.0, args=("s",))
    record = admin.hget(K.schedules, "model") or b""
    admin.delete(K.schedules, K.ticks, K.schedule_names)
    total = 12_000
    pipe = admin.pipeline(transaction=False)
    for index in range(total):
        pipe.hset(K.schedules, f"old-{index:05d}", record)
    pipe.execute()
    hkeys = calls(admin, "hkeys")
    counts = schedule_counts(app, ["other"])
    first = schedule_page(app, counts, None, 50)
    # HSCAN's COUNT is a hint (a bucket's more while the new hash is being rehashed): a
    # page names what it read, about 50, never the 12,000
    read = len(first.schedules) + len(first.unreadable)
    assert 50 <= read <= 100 and read == first.fields
    assert calls(admin, "hkeys") == hkeys
    assert 0 < admin.zcard(K.schedule_names) <= 5000 + 50
    assert len(app.schedules()) == total  # a whole walk (every page) names them all
    assert admin.zcard(K.schedule_names) == total
    hscan = calls(admin, "hscan")
    assert len(walk(app, 500)) == total
    assert calls(admin, "hscan") == hscan and calls(admin, "hkeys") == hkeys


def test_where_names_cannot_be_written_no_listing_copies_them_all(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    names = unarmed(app, admin, 9)
    admin.delete(K.schedule_names)
    admin.acl_setuser("nozadd", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zadd"])
    reader = build(f"redis://nozadd:pw@127.0.0.1:{redis_server.port}/0")
    hkeys = calls(admin, "hkeys")
    try:
        for _ in range(3):
            assert sorted(walk(reader, 4)) == names
    finally:
        reader.close()
        admin.acl_deluser("nozadd")
    assert calls(admin, "hkeys") == hkeys


def test_a_listing_by_name_that_can_no_longer_use_the_names_goes_on_by_scan(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    """A score planted between two pages, for a reader that cannot remove it: the
    rest is scanned, listing only the names after the last one listed."""
    names = unarmed(app, admin, 30)
    admin.acl_setuser("noremove", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zremrangebyscore"])
    reader = build(f"redis://noremove:pw@127.0.0.1:{redis_server.port}/0")
    try:
        counts = schedule_counts(reader, ["other"])
        page = schedule_page(reader, counts, None, 7)
        listed = [s.name for s in page.schedules]
        admin.zadd(K.schedule_names, {"s0003": 4})
        listed += walk(reader, 7, after=page.next, counts=counts)
    finally:
        reader.close()
        admin.acl_deluser("noremove")
    assert sorted(listed) == names
