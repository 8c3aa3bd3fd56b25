"""5,000 schedules on a real redis-server (issue 29, review M4): the dashboard's
schedules page and API and ``minitask schedules`` read a page of them, never all;
the pages, walked by their ``next``, list each schedule once, soonest first, then
those with no next tick and the records that cannot be read; ``--json`` lists all.

What a call reads is measured on the server (INFO: bytes it sent, commands it ran,
those its scripts ran counted), never by wall time.
"""
from __future__ import annotations

import contextlib
import io
import json
from typing import Any, Dict, Iterator, List, Set, Tuple

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

pytestmark = pytest.mark.integration

APP = "tests.apps.foreign"
TIMED = queue_keys("foreign", "timed")
MANY = 5000
#: Ticks the planted schedules share (many schedules on one tick: a page ends inside one)
TICKS = 40
BASE_MS = 1_900_000_000_000
#: What one page may cost, whatever the number of schedules (a page of 50 records of
#: about 300 bytes, the other reads of the page; all 5,000 are over 1.5 MB)
PAGE_BYTES = 80_000
PAGE_COMMANDS = 400


@pytest.fixture
def planted(redis_server: RedisServer, admin: "redis.Redis[bytes]",
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[Minitask, Set[str]]]:
    """The foreign app with MANY schedules in queue ``timed`` (TICKS ticks, then by
    name), one readable with no tick, and two records that cannot be read; written in
    one pipeline."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = build(redis_server.url)
    app.add_schedule("template", "hourly", every=60.0, queue="timed")
    record = admin.hget(TIMED.schedules, "template")
    admin.delete(TIMED.schedules, TIMED.ticks)
    names = {f"s{i:05d}" for i in range(MANY)}
    pipe = admin.pipeline(transaction=False)
    for i, name in enumerate(sorted(names)):
        pipe.hset(TIMED.schedules, name, record)
        pipe.zadd(TIMED.ticks, {name: BASE_MS + (i * 7919 % TICKS) * 60_000})
    pipe.hset(TIMED.schedules, "no-tick", record)
    pipe.hset(TIMED.schedules, "garbled", b"\x00not a record")
    pipe.hset(TIMED.schedules, b"\xff\xfe", b"{}")
    pipe.execute()
    try:
        yield app, names | {"no-tick"}
    finally:
        app.close()


def served(admin: "redis.Redis[bytes]") -> Tuple[int, int]:
    """The bytes the server has sent and the commands it has run (scripts' own too)."""
    sent = int(admin.info("stats")["total_net_output_bytes"])
    ran = sum(int(entry["calls"]) for entry in admin.info("commandstats").values())
    return sent, ran


def cost(admin: "redis.Redis[bytes]", action: Any) -> Tuple[Any, int, int]:
    """What ``action`` returned, and the bytes and commands the server spent on it."""
    sent, ran = served(admin)
    result = action()
    sent_after, ran_after = served(admin)
    return result, sent_after - sent, ran_after - ran


def cli(*argv: str) -> Tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_a_dashboard_page_and_its_api_read_one_page_of_5000_schedules(
        planted: Tuple[Minitask, Set[str]], admin: "redis.Redis[bytes]") -> None:
    app, _ = planted
    dashboard = Dashboard(app)
    (status, _, page), sent, ran = cost(admin, lambda: call(dashboard, "/schedules"))
    assert status == "200 OK" and sent < PAGE_BYTES and ran < PAGE_COMMANDS, (sent, ran)
    assert f'<span id="total">{MANY + 3}</span>' in page and 'id="next"' in page
    assert page.count("<tr><td>s") == 50
    (status, _, text), sent, ran = cost(admin, lambda: call(dashboard, "/api/schedules"))
    assert status == "200 OK" and sent < PAGE_BYTES and ran < PAGE_COMMANDS, (sent, ran)
    data = json.loads(text)
    assert data["total"] == MANY + 3 and data["counts"] == {"timed": MANY + 3}
    assert len(data["schedules"]) == 50 and data["next"]
    # the next page costs the same: its place is found, not walked to
    later = f"/api/schedules?limit=50&after={data['next']}"
    for _ in range(3):
        (_, _, text), sent, ran = cost(admin, lambda: call(dashboard, later))
        assert sent < PAGE_BYTES and ran < PAGE_COMMANDS, (sent, ran)
        later = f"/api/schedules?limit=50&after={json.loads(text)['next']}"


def test_the_pages_list_every_schedule_once_soonest_first_then_the_rest(
        planted: Tuple[Minitask, Set[str]]) -> None:
    app, names = planted
    dashboard = Dashboard(app)
    seen: List[str] = []
    times: List[Any] = []
    unreadable: List[Dict[str, str]] = []
    path = "/api/schedules?limit=500"
    for _ in range(MANY // 100):  # bounded: 11 pages are needed
        data = json.loads(call(dashboard, path)[2])
        assert len(data["schedules"]) + len(data["unreadable"]) <= 500
        seen += [row["name"] for row in data["schedules"]]
        times += [row["next_at"] for row in data["schedules"]]
        unreadable += data["unreadable"]
        if data["next"] is None:
            break
        path = f"/api/schedules?limit=500&after={data['next']}"
    assert data["next"] is None
    assert len(seen) == len(set(seen)) and set(seen) == names
    armed = [at for at in times if at is not None]
    assert armed == sorted(armed) and times[-1] is None and seen[-1] == "no-tick"
    assert {(entry["field"], entry["problem"][:26]) for entry in unreadable} == {
        ("garbled", "cannot decode a schedule r"), ("\\xff\\xfe", "is not UTF-8")}


def test_ticks_that_fire_between_pages_never_make_a_schedule_missed(
        planted: Tuple[Minitask, Set[str]], admin: "redis.Redis[bytes]") -> None:
    """A schedule that fires moves to a later tick: one not yet listed is still
    listed, however many schedules share the tick the page ended in."""
    app, names = planted
    counts = schedule_counts(app, ["timed"])
    first = schedule_page(app, counts, None, 120)
    listed = {schedule.name for schedule in first.schedules}
    # every schedule of the first tick fires: those listed and those not yet listed
    # (a page of offsets would now skip as many as moved from before it)
    due = admin.zrangebyscore(TIMED.ticks, BASE_MS, BASE_MS)
    admin.zadd(TIMED.ticks, {name: BASE_MS + TICKS * 60_000 for name in due})
    after = first.next
    while after is not None:
        page = schedule_page(app, counts, after, 500)
        listed |= {schedule.name for schedule in page.schedules}
        after = page.next
    assert listed == names


def test_the_cli_table_shows_the_first_100_and_says_how_many_more(
        planted: Tuple[Minitask, Set[str]], admin: "redis.Redis[bytes]") -> None:
    (code, out), sent, ran = cost(admin, lambda: cli("schedules", "-A", APP))
    assert code == 0 and sent < 2 * PAGE_BYTES and ran < PAGE_COMMANDS, (sent, ran)
    lines = out.splitlines()
    assert sum(line.startswith("s0") for line in lines) == 100
    assert lines[-1] == f"... and {MANY + 3 - 100} more schedules (use --json for all)"


def test_the_cli_json_lists_every_schedule_and_unreadable_record(
        planted: Tuple[Minitask, Set[str]]) -> None:
    code, out = cli("schedules", "-A", APP, "--json")
    assert code == 0
    report = json.loads(out)
    listed = [row["name"] for row in report["schedules"]]
    assert len(listed) == len(set(listed)) and set(listed) == planted[1]
    assert {entry["field"] for entry in report["unreadable"]} == {"garbled", "\\xff\\xfe"}


def test_a_place_no_page_gave_is_refused(planted: Tuple[Minitask, Set[str]]) -> None:
    dashboard = Dashboard(planted[0])
    for after in ("nonsense", "WyJ0aW1lZCIsICJhcm1lZCIsICJuYW4iLCAiIl0"):
        status, _, text = call(dashboard, f"/api/schedules?after={after}")
        assert status == "400 Bad Request" and "no place a page of schedules gave" in text
