"""Ticks naming no schedule record (issue 29, M1) on a real redis-server: 1,700 of
them before a schedule's tick hid every schedule from ``minitask schedules`` and the
dashboard for good, with a message about schedules with no tick. Now every listing
shows every real schedule, whoever meets such a tick (a listing, a worker's read)
removes it, a tick whose record exists is never removed, and a page that stops early
says what it passed over."""
from __future__ import annotations

import contextlib
import io
import json
import logging
from typing import Iterator, List, Optional, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_page
from minitask.broker.keys import queue_keys
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.servers import RedisServer
from tests.unit.test_dashboard import call

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

APP = "tests.apps.foreign"
TIMED = queue_keys("foreign", "timed")


@pytest.fixture
def real(redis_server: RedisServer, admin: "redis.Redis[bytes]",
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    """The foreign app with one real schedule, ``real``, in queue ``timed``."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = build(redis_server.url)
    app.add_schedule("real", "hourly", every=60.0, queue="timed")
    assert admin.zscore(TIMED.ticks, "real") is not None
    try:
        yield app
    finally:
        app.close()


def dangle(admin: "redis.Redis[bytes]", count: int, prefix: str = "ghost") -> None:
    """Plant ``count`` ticks with past scores (before every real one) naming no record."""
    for start in range(0, count, 10_000):
        admin.zadd(TIMED.ticks, {f"{prefix}{i:07d}": 1_000 + i
                                 for i in range(start, min(count, start + 10_000))})


def cli(*argv: str) -> Tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_1700_dangling_ticks_hide_no_schedule_and_are_removed(
        real: Minitask, admin: "redis.Redis[bytes]") -> None:
    dangle(admin, 1_700)
    code, out = cli("schedules", "-A", APP)
    assert code == 0
    assert "real" in out and "stopped early" not in out, out
    # the listing removed them: only the real tick is left, whose record exists
    assert admin.zrange(TIMED.ticks, 0, -1) == [b"real"]
    assert admin.hexists(TIMED.schedules, "real")


def test_the_dashboard_lists_the_schedule_behind_800_dangling_ticks(
        real: Minitask, admin: "redis.Redis[bytes]") -> None:
    dangle(admin, 800)
    status, _, text = call(Dashboard(real), "/api/schedules")
    assert status == "200 OK"
    data = json.loads(text)
    assert [entry["name"] for entry in data["schedules"]] == ["real"], data
    assert not data["stopped"]
    assert admin.zcard(TIMED.ticks) == 1


def test_a_worker_read_removes_dangling_ticks_and_keeps_real_ones(
        real: Minitask, admin: "redis.Redis[bytes]") -> None:
    dangle(admin, 300)
    found = real.broker.schedules.armed(["timed"], {"timed": ["real"]})
    assert [entry.name for entry in found["timed"]] == ["real"]
    # the first ARMED_BATCH ticks read were removed; the real one stays
    assert admin.zscore(TIMED.ticks, "real") is not None
    left = admin.zcard(TIMED.ticks)
    assert left < 301, left
    for _ in range(400):  # each read scans on: every dangling one goes, in bounded reads
        if admin.zcard(TIMED.ticks) == 1:
            break
        real.broker.schedules.armed(["timed"], {"timed": ["real"]})
    assert admin.zrange(TIMED.ticks, 0, -1) == [b"real"]


def walk(app: Minitask) -> List[Tuple[List[str], str]]:
    """Every page of the app's schedules (50 a page): names listed, and what it said."""
    counts = schedule_counts(app, ["timed"])
    pages: List[Tuple[List[str], str]] = []
    after: Optional[str] = None
    while True:
        assert len(pages) < 20, pages
        page = schedule_page(app, counts, after, 50)
        pages.append(([schedule.name for schedule in page.schedules], page.stopped))
        if page.next is None:
            return pages
        assert page.next != after
        after = page.next


def test_past_a_page_of_budget_dangling_ticks_the_page_says_so_and_the_next_goes_on(
        real: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    dangle(admin, 90_000)
    with caplog.at_level(logging.WARNING):
        pages = walk(real)
    said = [record.getMessage() for record in caplog.records if "naming no" in record.getMessage()]
    assert len(said) == 2 and "80,000 tick(s) naming no schedule record were passed over and " \
        "removed" in said[0] and "10,000 tick(s)" in said[1], said
    assert [name for names, _ in pages for name in names] == ["real"]
    first_names, said = pages[0]
    assert first_names == [] and "passed over 80,000 tick(s)" in said, said
    assert "name no schedule record" in said and "removed them" in said, said
    assert "with none are looked for" not in said
    assert admin.zrange(TIMED.ticks, 0, -1) == [b"real"]


def test_where_redis_refuses_the_removal_the_listing_still_shows_every_schedule(
        real: Minitask, admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    dangle(admin, 1_700)
    admin.acl_setuser("nozrem", enabled=True, nopass=True, keys=["*"], channels=["*"],
                      commands=["+@all", "-zrem"])
    url = redis_server.url.replace("redis://", "redis://nozrem:x@")
    monkeypatch.setenv("MINITASK_BROKER_URL", url)
    other = build(url)
    try:
        with caplog.at_level(logging.WARNING):
            code, out = cli("schedules", "-A", APP)
        assert "1,700 tick(s) naming no schedule record were passed over and 0 removed " \
            "(1,700 left: Redis refused their removal)" in caplog.text, caplog.text
        assert code == 0 and "real" in out and "stopped early" not in out, out
        assert admin.zcard(TIMED.ticks) == 1_701  # none removed: each listing passes them
        pages = walk(other)
        assert [name for names, _ in pages for name in names] == ["real"]
    finally:
        other.close()
        admin.acl_deluser("nozrem")
