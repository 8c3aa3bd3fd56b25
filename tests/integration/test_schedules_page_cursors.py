"""REVIEW10 of the schedule pages, against the suite's real redis-server: a crafted
``?after=`` is the caller's error (400 naming it), never Redis's or the server's
(F3); once the armed schedules are listed, no page is empty but the last (F4)."""
from __future__ import annotations

import base64
import json
from typing import Any, Iterator, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_page
from minitask.broker.keys import QueueKeys
from minitask.dashboard.web import Dashboard
from tests.support.servers import RedisServer
from tests.unit.test_dashboard import call

pytestmark = pytest.mark.integration

QUEUE = "sched"


@pytest.fixture
def app(redis_server: RedisServer) -> Iterator[Tuple[Minitask, Any]]:
    app = Minitask("rv10s", broker=redis_server.client())

    @app.task(queue=QUEUE)
    def job() -> int:
        return 1

    try:
        yield app, job
    finally:
        app.close()


def _after(value: Any) -> str:
    """A cursor as ``_cursor`` packs one: base64 of JSON, unpadded."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize("after", [
    _after([QUEUE, "unarmed", "99999999999999999999999", ""]),  # HSCAN: invalid cursor
    _after([QUEUE, "unarmed", str(2 ** 64), ""]),
    base64.urlsafe_b64encode(b"[" * 100_000).decode().rstrip("="),  # RecursionError
    _after([QUEUE, "unarmed", "0"]),  # not four strings
    _after([[QUEUE], "armed", "", ""]),
    "A" * 20_000,  # longer than any cursor a page gives
])
def test_a_crafted_cursor_is_refused_as_the_callers_error(
        app: Tuple[Minitask, Any], after: str) -> None:
    minitask_app, job = app
    for i in range(5):
        minitask_app.add_schedule(f"s{i}", job, every=60)
    dashboard = Dashboard(minitask_app)
    for path in (f"/api/schedules?after={after}", f"/schedules?after={after}"):
        status, _, text = call(dashboard, path)
        assert status == "400 Bad Request", (path[:60], status, text[:200])
        assert "no place a page of schedules gave" in text


def test_the_largest_hscan_cursor_is_still_accepted(app: Tuple[Minitask, Any]) -> None:
    """2**64 - 1 is a cursor Redis may hand out: it reaches HSCAN (which ends a scan
    it does not know somewhere), no 400."""
    minitask_app, job = app
    minitask_app.add_schedule("s0", job, every=60)
    status, _, _ = call(Dashboard(minitask_app),
                        f"/api/schedules?after={_after([QUEUE, 'unarmed', str(2 ** 64 - 1), ''])}")
    assert status == "200 OK"


def test_no_page_after_the_armed_ones_is_empty_but_the_last(
        app: Tuple[Minitask, Any], admin: "redis.Redis[bytes]") -> None:
    """3,000 armed schedules at 50 a page: 60 full pages, then one empty page, the end
    (the unarmed pass read 16 HSCANs of about 50 armed records a page, and showed 4
    empty pages with a next link)."""
    minitask_app, job = app
    minitask_app.add_schedule("s0", job, every=60)
    k = QueueKeys("rv10s", QUEUE)
    record = admin.hget(k.schedules, "s0")
    tick = admin.zscore(k.ticks, "s0")
    assert record is not None and tick is not None
    pipe = admin.pipeline(transaction=False)
    for i in range(1, 3000):
        pipe.hset(k.schedules, f"s{i}", record)
        pipe.zadd(k.ticks, {f"s{i}": tick + i})
    pipe.execute()
    counts = schedule_counts(minitask_app, [QUEUE])
    after = None
    sizes = []
    names = set()
    for _ in range(100):  # bounded: 61 pages are needed
        page = schedule_page(minitask_app, counts, after, 50)
        sizes.append(len(page.schedules) + len(page.unreadable))
        names |= {schedule.name for schedule in page.schedules}
        if page.next is None:
            break
        after = page.next
    assert page.next is None
    assert len(names) == 3000
    assert 0 not in sizes[:-1], sizes
