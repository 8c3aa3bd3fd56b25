"""A member of a fair queue's paused groups longer than any group name minitask writes
is removed by the first read that meets it, never sent (issue 29, probe 29e's M), on
the suite's redis-server.

A 50 MB member planted in ``flow:groups_paused`` was sent whole by every ``minitask
status``, dashboard home page and ``/metrics`` scrape: ``FlowStore.paused_many`` read
the set by a plain SSCAN and cut the names only once they had arrived. Now
paused_page.lua measures each member of its bounded SSCAN page against the longest
group name (4 bytes x limits.MAX_GROUP_LENGTH) and removes a longer one there (SREM),
said once naming the key and its length, never its content; the next reads cost what
any does. Costs are bytes Redis sends (INFO's total_net_output_bytes) and its command
counts, never time.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard
from tests.apps.held import build
from tests.support.cli import run
from tests.support.foreign_said import said_afresh
from tests.support.pages import get
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "tests.apps.held"
FAIR = queue_keys("held", "fair")
SIZE = 5 << 20
HUGE = b"P" * SIZE
#: What a status, a page or a scrape here may weigh at most: the plant is 5 MB.
MOST = 100_000


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What this process said before (another test's plant) is not remembered here."""
    said_afresh(monkeypatch)


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    made = build(redis_server.url)
    admin.sadd(AppKeys("held").queues, "fair", "default")
    admin.zadd(FAIR.groups, {"paused-good": 4})
    admin.set(FAIR.groups_ready, 4)
    admin.sadd(FAIR.groups_paused, HUGE, "paused-good")
    yield made
    made.close()


def sent(admin: Any) -> int:
    return int(admin.info("stats")["total_net_output_bytes"])


@pytest.mark.parametrize("where", ["status", "status --json", "/", "/api/", "/metrics"])
def test_an_overlong_paused_group_is_removed_unsent_and_said_once(
        app: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, where: str) -> None:
    def look() -> str:
        if where.startswith("status"):
            code, out = run(capsys, *where.split(), "-A", APP)
            assert code == 0 and "Traceback" not in out, out[-2000:]
            return out
        status, body = get(Dashboard(app), where)
        assert status == "200 OK", body[:2000]
        return body

    before = sent(admin)
    out = look()
    assert len(out) < MOST, len(out)
    assert sent(admin) - before < SIZE // 10  # the reply never held it
    if where != "/metrics":  # (a scrape counts paused groups, names none)
        assert "paused-good" in out, out[-2000:]
    assert "P" * 1000 not in out
    assert not admin.sismember(FAIR.groups_paused, HUGE)  # removed by that read
    assert admin.smembers(FAIR.groups_paused) == {b"paused-good"}
    said = [record.getMessage() for record in caplog.records
            if FAIR.groups_paused in record.getMessage()]
    assert len(said) == 1 and f"a member of {SIZE:,} bytes" in said[0], said
    assert "P" * 100 not in caplog.text  # its length, never its content
    # nothing left to read again: the next look removes nothing and says nothing
    caplog.clear()
    admin.config_resetstat()
    before = sent(admin)
    look()
    assert sent(admin) - before < MOST
    assert "cmdstat_srem" not in admin.info("commandstats")
    assert FAIR.groups_paused not in caplog.text


def test_a_paused_groups_read_costs_the_same_with_ten_or_a_hundred_thousand(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """One bounded SSCAN page of names (and a ZSCORE each), never the whole set."""
    app.broker.flow.paused_many(["fair"])  # the plant removed: only sound names below
    costs = {}
    for count in (10, 100_000):
        admin.delete(FAIR.groups_paused)
        with admin.pipeline(transaction=False) as pipe:
            for first in range(0, count, 10_000):
                pipe.sadd(FAIR.groups_paused,
                          *[f"g{n:06d}" for n in range(first, min(count, first + 10_000))])
            pipe.execute()
        before = sent(admin)
        found = app.broker.flow.paused_many(["fair"])["fair"]
        costs[count] = sent(admin) - before
        assert found["paused_groups"] == count
        assert 0 < len(found["paused_shown"]) <= 10
    assert max(costs.values()) < 4_000, costs
