"""100,000 armed schedules on a real redis-server (probe 10, L1): past the armed ones,
a page looks for the schedules with no next run among every record, a bounded number
of them a page (schedule_page.lua's budget times PAGE_CALLS, 80,000), so a page may
end before it found any. Such a page says it stopped early (``stopped``, in the
admin's page, /api/schedules and the dashboard's page), and its ``next`` goes on
from where it stopped: no page but the last is an empty page with a next link and
nothing said, and the walk ends. Planted in a few pipelined commands."""
from __future__ import annotations

import json
from typing import Any, List, Optional, Set

import pytest
import redis

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_page
from minitask.admin.scheduling import SchedulePage, _cursor
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.schedules import Place

from tests.unit.test_dashboard import call

pytestmark = [pytest.mark.integration, pytest.mark.app("armed", on="server"),
              pytest.mark.timeout(120)]

MANY = 100_000
BASE_MS = 1_900_000_000_000
CHUNK = 10_000
#: Pages past the armed ones the walk may take at most (100,000 records at 80,000 a
#: page: 2; more is no progress).
MOST_PAGES = 6


def plant(app: Minitask, client: "redis.Redis[bytes]", unarmed: List[str]) -> str:
    """MANY armed schedules of queue ``default`` (copies of one record, each on a tick
    of its own) and ``unarmed`` with no tick; the cursor of the page that follows the
    last armed one."""
    app.task(name="t.tick")(lambda: None)
    app.add_schedule("template", "t.tick", every=60.0)
    keys = queue_keys(app.name, "default")
    record = client.hget(keys.schedules, "template")
    assert record is not None
    client.delete(keys.schedules, keys.ticks)
    client.sadd(AppKeys(app.name).queues, b"default")
    for start in range(0, MANY, CHUNK):
        names = [f"s{i:06d}" for i in range(start, start + CHUNK)]
        pipe = client.pipeline(transaction=False)
        pipe.hset(keys.schedules, mapping={name: record for name in names})
        pipe.zadd(keys.ticks, {name: BASE_MS + int(name[1:]) * 1000 for name in names})
        pipe.execute()
    for name in unarmed:
        client.hset(keys.schedules, name, record)
    last = f"s{MANY - 1:06d}"
    return _cursor("default", Place("armed", str(BASE_MS + (MANY - 1) * 1000), last.encode()))


def walk(app: Minitask, after: str) -> List[SchedulePage]:
    """The pages from ``after`` on, each checked: one with a next link lists a schedule
    or says it stopped early, and its next link is another place."""
    counts = schedule_counts(app, ["default"])
    pages: List[SchedulePage] = []
    place: Optional[str] = after
    while place is not None:
        assert len(pages) < MOST_PAGES, [page.next for page in pages]
        page = schedule_page(app, counts, place)
        pages.append(page)
        if page.next is not None:
            assert page.schedules or page.stopped, (len(pages), page)
            assert page.next != place
        place = page.next
    return pages


def test_past_100000_armed_schedules_an_empty_page_says_it_stopped_early(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    after = plant(app, admin, [])
    pages = walk(app, after)
    assert [page.schedules for page in pages] == [[]] * len(pages)
    first = pages[0]
    assert first.next is not None and "stopped early" in first.stopped, first
    assert pages[-1].next is None
    # the walk named the records (an unnamed hash of more than 5,000 is named a page at
    # a time as it is scanned): the listings since page the names, the dashboard too
    first = schedule_page(app, schedule_counts(app, ["default"]), after)
    assert first.next is not None and "stopped early" in first.stopped, first
    dashboard = Dashboard(app)
    status, _, text = call(dashboard, f"/api/schedules?after={after}")
    assert status == "200 OK", text
    shown: Any = json.loads(text)
    assert shown["schedules"] == [] and shown["next"] == first.next
    assert shown["stopped"] == first.stopped
    status, _, page = call(dashboard, f"/schedules?after={after}")
    assert status == "200 OK" and "stopped early" in page and 'id="next"' in page


def test_the_schedules_with_no_next_run_among_100000_armed_are_all_found(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    unarmed = {"u-one", "u-two", "u-three"}
    pages = walk(app, plant(app, admin, sorted(unarmed)))
    found: Set[str] = {schedule.name for page in pages for schedule in page.schedules}
    assert found == unarmed
