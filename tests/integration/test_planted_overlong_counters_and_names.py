"""A count or a name longer than any minitask writes, planted in a queue's counters, its
delivery counts or its broadcast indexes, is measured and never read whole again
(issue 29, probe 29f's M1-M6), on the suite's redis-server.

Before: ``flow_parked`` and ``flow:groups_ready`` (counts) were read whole (GET) by every
``minitask status``, dashboard page and scrape, a ``deliveries`` value by every listing
of scheduled or running tasks (peek.lua), and a ``bcast:since`` member or ``bcast:cursors``
field name was copied into Lua by every broadcast send or pull, for ever (or into the
other indexes). Now the counts are measured (STRLEN, HSTRLEN) and read as none, said once
by length; the broadcast scripts remove such a member where they meet it. Costs are
bytes Redis sends (INFO's total_net_output_bytes) and what its keys hold, never time.
"""
from __future__ import annotations

import time
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.foreign_said import said_afresh
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
OTHER = queue_keys("foreign", "other")
NEWS = queue_keys("foreign", "news")
SIZE = 5 << 20
#: What one status, one page or one scrape here may make Redis send at most.
MOST = 200_000


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What this process said before (another test's plant) is not remembered here."""
    said_afresh(monkeypatch)


def sent(admin: Any) -> int:
    return int(admin.info("stats")["total_net_output_bytes"])


def lines(caplog: pytest.LogCaptureFixture, key: str) -> List[str]:
    return [record.getMessage() for record in caplog.records if key in record.getMessage()]


def look(app: Minitask, *paths: str) -> None:
    """A status and the dashboard's ``paths``, each answering without a traceback."""
    code, out = cli("status", "-A", APP)
    assert code == 0 and "Traceback" not in out, out[-2000:]
    dashboard = Dashboard(app)
    for path in paths:
        status, body = get(dashboard, path)
        assert status == "200 OK" and "Traceback" not in body, (path, body[:2000])


@pytest.mark.parametrize("which", ["flow_parked", "groups_ready"])
def test_an_overlong_queue_counter_is_measured_never_sent(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture,
        which: str) -> None:
    key = getattr(OTHER, which)
    admin.set(key, b"7" * SIZE)
    app.tasks["mark"].delay("a")  # the queue is known, with a task ready
    before = sent(admin)
    for _ in range(2):
        look(app, "/", "/api/", "/metrics")
    assert sent(admin) - before < 2 * MOST
    assert app.broker.flow.parked_many(["other"]) == {"other": 0}
    said = lines(caplog, key)
    assert len(said) == 1 and f"{SIZE:,} bytes" in said[0], said
    assert "7" * 100 not in caplog.text


def test_a_short_counter_is_still_read(app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.set(OTHER.flow_parked, 20 * b"9")  # 20 digits: the longest a count may be
    admin.set(NEWS.flow_parked, b"3")
    assert app.broker.flow.parked_many(["other", "news"]) == {"other": 0, "news": 3}


@pytest.mark.parametrize("which", ["delayed", "leases"])
def test_an_overlong_delivery_count_is_not_sent_to_listings(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture,
        which: str) -> None:
    handles = [app.tasks["mark"].apply_async((str(n),), delay=600) for n in range(3)]
    if which == "leases":  # as a worker holding them
        admin.zunionstore(OTHER.leases, [OTHER.delayed])
        admin.delete(OTHER.delayed)
    admin.hset(OTHER.deliveries, handles[0].id, b"1" * SIZE)
    admin.hset(OTHER.deliveries, handles[1].id, b"2")
    command, path = (("scheduled", "/scheduled") if which == "delayed"
                     else ("running", "/running"))
    before = sent(admin)
    for _ in range(2):
        code, out = cli("inspect", command, "-A", APP)
        assert code == 0 and handles[0].id in out and "Traceback" not in out, out[-2000:]
        status, body = get(Dashboard(app), path)
        assert status == "200 OK" and handles[0].id in body, body[:2000]
    assert sent(admin) - before < 4 * MOST
    _, found = app.broker.admin.peek("other", which, 10)
    counts = {entry.task_id: entry.deliveries for entry in found}
    assert counts[handles[0].id] == 0 and counts[handles[1].id] == 2, counts
    said = lines(caplog, OTHER.deliveries)
    assert said and f"{SIZE:,} bytes" in said[0], said


def subscribe(app: Minitask, *names: str) -> None:
    now_ms = int(time.time() * 1000)
    for name in names:
        app.broker.broadcasts.subscribe("news", name, now_ms)


def pull(app: Minitask, subscriber: str) -> Any:
    call = app.broker.broadcasts.pull_call("news", subscriber, 10,
                                           int(time.time() * 1000))
    return app.broker.broadcasts.pulled(
        app.broker.transport.run_calls([call], "pull")[0])


def test_an_overlong_since_member_is_removed_by_the_first_send(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    subscribe(app, "sub1", "sub2")
    since = NEWS.broadcast("since")
    admin.zadd(since, {b"S" * SIZE: 1})
    app.tasks["hear"].delay(1)
    assert set(admin.zrange(since, 0, -1)) == {b"sub1", b"sub2"}
    admin.config_resetstat()
    app.tasks["hear"].delay(2)
    assert "cmdstat_zrem" not in admin.info("commandstats")
    assert pull(app, "sub1").pulled == 2


def test_an_overlong_highest_place_is_removed_and_the_sequence_kept(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """high_water() reads the highest member of places: a planted long one is removed,
    and the next member's score still counts (no sequence is handed out twice)."""
    subscribe(app, "sub1")
    app.tasks["hear"].delay(1)
    places = NEWS.broadcast("places")
    admin.zadd(places, {b"P" * SIZE: 2 ** 40})
    admin.hdel(NEWS.broadcast("state"), "seq")  # high_water() is read to start again
    app.tasks["hear"].delay(2)
    assert set(admin.zrange(places, 0, -1)) == {b"sub1"}
    assert pull(app, "sub1").pulled == 2


def test_an_overlong_cursors_field_is_never_indexed(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    subscribe(app, "sub1")
    app.tasks["hear"].delay(1)
    cursors = NEWS.broadcast("cursors")
    admin.hset(cursors, b"C" * SIZE, 1)  # more fields than places: the pull indexes again
    assert pull(app, "sub1").pulled == 1
    assert set(admin.hkeys(cursors)) == {b"sub1"}
    for index in ("places", "since", "alive"):
        assert set(admin.zrange(NEWS.broadcast(index), 0, -1)) == {b"sub1"}, index
    admin.config_resetstat()
    app.tasks["hear"].delay(2)
    assert pull(app, "sub1").pulled == 1
    assert "cmdstat_hscan" not in admin.info("commandstats")


def test_an_overlong_cursor_is_measured_before_it_is_read(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """Measured (HSTRLEN) and never read (HGET): a pull with no call to pull measures
    nothing else, so its one HSTRLEN is the cursor's."""
    subscribe(app, "sub1")
    cursors = NEWS.broadcast("cursors")
    admin.hset(cursors, "sub1", b"0" * SIZE)
    admin.config_resetstat()
    pulled = pull(app, "sub1")
    assert pulled.pulled == 0 and "no call sequence" in pulled.note, pulled
    assert f"{SIZE} bytes" in pulled.note and "0" * 100 not in pulled.note, pulled
    assert len(admin.hget(cursors, "sub1") or b"") < 32
    stats = admin.info("commandstats")
    assert stats.get("cmdstat_hstrlen", {}).get("calls") == 1, stats
    app.tasks["hear"].delay(1)
    assert pull(app, "sub1").pulled == 1
