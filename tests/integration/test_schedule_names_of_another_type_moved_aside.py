"""A schedule_names of another type is moved aside by the first listing, and the names
made again (issue 29, probe 29i's M-D).

``schedule_names`` (the sorted set the listings page) set to a string by someone else
was never made again: schedule_save.lua skips the name it cannot add, and each listing
fell back to scanning the records (HSCAN), copying a 50 MB planted record inside Redis
at every ``minitask schedules``, for ever. The first listing now moves the key aside
whole to ``schedule_names:foreign`` (as minitask does with its other keys of another
type: kept, never deleted), said once, and names the records again; later listings
make no HSCAN. Where Redis refuses the move (an ACL without RENAME, as a replica) the
records are scanned as before. Costs are Redis's command counts, never wall time.

A real redis-server, the app of tests.apps.foreign.
"""
from __future__ import annotations

from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.schedule_walk import walk
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
K = queue_keys("foreign", "other")
BIG = 3 << 20
PLANTED = b"someone else's value"


def hscans(admin: "redis.Redis[bytes]") -> int:
    """How many HSCANs Redis ran (scripts' calls included)."""
    return int(admin.info("commandstats").get("cmdstat_hscan", {}).get("calls", 0))


def planted(app: Minitask, admin: "redis.Redis[bytes]") -> List[str]:
    """Two schedules with no tick, one armed, a big planted record and a string where
    the names are kept; the names the listings show."""
    idle = ["idle-one", "idle-two"]
    for name in idle:
        app.add_schedule(name, "mark", every=3600.0, args=("s",))
        admin.zrem(K.ticks, name)
    app.add_schedule("armed-one", "mark", every=3600.0, args=("s",))
    admin.hset(K.schedules, "planted-big", b"\x81" * BIG)
    admin.delete(K.schedule_names)
    admin.set(K.schedule_names, PLANTED)
    return sorted([*idle, "armed-one", "planted-big"])


def moved(caplog: pytest.LogCaptureFixture) -> List[str]:
    """The lines said of schedule_names moved aside."""
    return [record.getMessage() for record in caplog.records
            if "moved aside" in record.getMessage()]


def test_names_of_another_type_are_moved_aside_and_made_again(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    expected = planted(app, admin)
    code, said = cli("schedules", "-A", APP)
    assert code == 0 and "idle-one" in said and "idle-two" in said, said
    lines = moved(caplog)
    assert len(lines) == 1 and f"moved aside to {K.schedule_names}:foreign" in lines[0], lines
    assert admin.type(K.schedule_names) == b"zset"
    assert admin.zcard(K.schedule_names) == len(expected)
    assert admin.get(f"{K.schedule_names}:foreign") == PLANTED  # kept, not destroyed
    for limit in (50, 2):
        before = hscans(admin)
        assert sorted(walk(app, limit)) == expected
        assert hscans(admin) == before  # the names are paged, the records never scanned
    code, said = cli("schedules", "-A", APP)
    assert code == 0 and len(moved(caplog)) == 1, said  # said once
    app.add_schedule("late-one", "mark", every=3600.0, args=("s",))
    assert admin.zscore(K.schedule_names, "late-one") == 0  # saves name again
    assert admin.hstrlen(K.schedules, "planted-big") == BIG  # left in place


def test_where_the_move_is_refused_the_records_are_scanned(
        app: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    """A reader whose RENAME Redis refuses (an ACL without it, as a replica) lists
    every schedule by HSCAN, and leaves the planted value where it is."""
    expected = planted(app, admin)
    admin.acl_setuser("norename", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-rename"])
    reader = build(f"redis://norename:pw@127.0.0.1:{redis_server.port}/0")
    try:
        before = hscans(admin)
        assert sorted(walk(reader, 3)) == expected
        assert hscans(admin) > before
    finally:
        reader.close()
        admin.acl_deluser("norename")
    assert admin.get(K.schedule_names) == PLANTED
    assert not admin.exists(f"{K.schedule_names}:foreign")
    assert sorted(walk(app, 3)) == expected and admin.type(K.schedule_names) == b"zset"
