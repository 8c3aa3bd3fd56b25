"""A huge schedule record costs no listing a copy of it (issue 29, probe 29g's M).

A record of 50 MB in a queue's schedules hash (planted, or longer than the reading
app writes) was listed as too large and left in place, but the unarmed phase of
schedule_page.lua paged the hash with HSCAN, which copies every value inside Redis:
0.26-0.43 s of Redis at every ``minitask schedules``, ``app.schedules()`` and
dashboard /schedules. The listings now page ``schedule_names`` (a sorted set of the
names, written with each record) and measure each record before reading it: no HSCAN,
and a hash an older minitask wrote (no names kept) is named once (HKEYS: names only).
Costs are Redis's command counts and bytes sent, never wall time.

A real redis-server, the app of tests.apps.foreign.
"""
from __future__ import annotations

from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_listing
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.schedule_walk import walk
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
K = queue_keys("foreign", "other")
HUGE = 50 << 20


def calls(admin: "redis.Redis[bytes]", *commands: str) -> List[int]:
    """How many times Redis ran each of ``commands`` (scripts' calls included)."""
    stats = admin.info("commandstats")
    return [int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in commands]


def unarmed(app: Minitask, admin: "redis.Redis[bytes]", *names: str) -> None:
    """Schedules with no tick (their runs are over, or not armed yet)."""
    for name in names:
        app.add_schedule(name, "mark", every=3600.0, args=("s",))
        admin.zrem(K.ticks, name)


def test_a_huge_unarmed_record_is_listed_without_being_copied(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    app.add_schedule("good-schedule", "mark", every=3600.0, args=("s",))
    unarmed(app, admin, "idle-schedule")
    admin.hset(K.schedules, "planted-big", b"\x81" * HUGE)  # no tick: unarmed
    named = 0
    for _ in range(3):
        before = calls(admin, "hscan", "hkeys", "hget", "hmget")
        code, said = cli("schedules", "-A", APP)
        assert code == 0 and "good-schedule" in said and "idle-schedule" in said, said
        assert f"field 'planted-big' is too large ({HUGE:,} bytes" in said, said
        listed, unreadable = schedule_listing(app)
        assert sorted(s.name for s in listed) == ["good-schedule", "idle-schedule"]
        assert [row["field"] for row in unreadable] == ["planted-big"]
        hscan, hkeys, hget, hmget = (after - was for after, was in zip(
            calls(admin, "hscan", "hkeys", "hget", "hmget"), before))
        # no scan of the records (it copied 50 MB each time); the names once at most
        # (the planted one was never named); no read of the huge record
        assert hscan == 0 and hkeys <= 1, (hscan, hkeys)
        named += hkeys
    assert named <= 1  # once in all
    assert admin.hstrlen(K.schedules, "planted-big") == HUGE  # left in place


def test_an_older_minitasks_hash_is_named_once_and_listed_by_pages(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A hash written by a minitask that kept no names: the first listing names its
    records once; pages of 5 list each schedule once; a name whose record is gone is
    dropped, and a record left unnamed (the counts agreeing) is named next time."""
    idle = [f"idle-{index:02d}" for index in range(12)]
    unarmed(app, admin, *idle)
    app.add_schedule("armed-one", "mark", every=3600.0, args=("s",))
    admin.delete(K.schedule_names)  # as an older minitask left it
    admin.hset(K.schedules, "planted-big", b"\x81" * HUGE)
    hkeys = calls(admin, "hkeys")[0]
    expected = sorted([*idle, "armed-one", "planted-big"])
    assert sorted(walk(app, 5)) == expected
    assert admin.zcard(K.schedule_names) == len(expected)
    assert calls(admin, "hkeys")[0] == hkeys + 1
    assert sorted(walk(app, 4)) == expected and calls(admin, "hkeys")[0] == hkeys + 1
    # a name whose record is gone: never listed, and dropped; a record of an older
    # minitask written meanwhile (unnamed, the counts agreeing): listed by the next walk
    admin.zadd(K.schedule_names, {"ghost": 0})
    admin.hset(K.schedules, "idle-late", admin.hget(K.schedules, "idle-00") or b"")
    assert sorted(walk(app, 5)) == expected
    assert admin.zscore(K.schedule_names, "ghost") is None
    assert sorted(walk(app, 5)) == sorted([*expected, "idle-late"])
    hscan = calls(admin, "hscan")[0]
    walk(app, 5)
    assert calls(admin, "hscan")[0] == hscan


def test_removing_a_schedule_removes_its_name(app: Minitask,
                                              admin: "redis.Redis[bytes]") -> None:
    app.add_schedule("short-lived", "mark", every=3600.0, args=("s",))
    assert admin.zscore(K.schedule_names, "short-lived") == 0
    assert app.remove_schedule("short-lived")
    assert admin.zcard(K.schedule_names) == 0


def test_where_the_names_cannot_be_written_the_records_are_scanned(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    """A reader whose writes Redis refuses (here an ACL without ZADD, as a replica)
    cannot name an older minitask's records: it lists them all the same, by HSCAN."""
    idle = [f"idle-{index:02d}" for index in range(7)]
    unarmed(app, admin, *idle)
    admin.delete(K.schedule_names)
    admin.acl_setuser("nozadd", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-zadd"])
    reader = build(f"redis://nozadd:pw@127.0.0.1:{redis_server.port}/0")
    try:
        assert sorted(walk(reader, 3)) == idle
    finally:
        reader.close()
        admin.acl_deluser("nozadd")
    assert admin.zcard(K.schedule_names) == 0
    assert sorted(walk(app, 3)) == idle and admin.zcard(K.schedule_names) == len(idle)
