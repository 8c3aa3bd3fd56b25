"""Listings never send a member longer than any id minitask writes (issue 29, probe 29d's
M2), on the suite's redis-server.

A 50 MB member of a queue's dead set, delayed set or leases was sent whole to every
``dead list``, ``inspect scheduled``, ``inspect running`` and dashboard page listing
them (the dead letters page weighed 262 MB: the id rendered five times), at every call.
Now the scripts that read them (dead_heads.lua, peek.lua) measure each member against
wire.message.MAX_ID_BYTES and remove a longer one there, unsent, said once naming the
key and the length: the first listing costs a ZREM, the next ones what any does.
"""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard
from tests.apps.held import build
from tests.support.cli import run
from tests.support.pages import get
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "tests.apps.held"
DEFAULT = queue_keys("held", "default")
SIZE = 5 << 20
#: What any listing here may weigh at most: the plants are 5 MB each.
MOST = 100_000


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    made = build(redis_server.url)
    admin.sadd(AppKeys("held").queues, "default")
    ahead = (int(time.time() * 1000) + 600_000) * 10
    admin.zadd(DEFAULT.dead, {b"D" * SIZE: 10, b"dead-good": 11})
    admin.zadd(DEFAULT.delayed, {b"S" * SIZE: ahead, b"delayed-good": ahead})
    admin.zadd(DEFAULT.leases, {b"R" * SIZE: ahead, b"lease-good": ahead})
    yield made
    made.close()


def planted(admin: Any) -> int:
    return sum(admin.zscore(key, member * SIZE) is not None for key, member in (
        (DEFAULT.dead, b"D"), (DEFAULT.delayed, b"S"), (DEFAULT.leases, b"R")))


@pytest.mark.parametrize("argv,good,key", [
    (("dead", "-A", APP, "list"), "dead-good", DEFAULT.dead),
    (("inspect", "-A", APP, "scheduled"), "delayed-good", DEFAULT.delayed),
    (("inspect", "-A", APP, "running", "--json"), "lease-good", DEFAULT.leases)])
def test_the_cli_listings_never_send_an_overlong_member(
        app: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, argv: Any, good: str, key: str) -> None:
    admin.config_resetstat()
    before = int(admin.info("stats")["total_net_output_bytes"])
    code, out = run(capsys, *argv)
    assert code == 0, out[-2000:]
    assert len(out) < MOST and good in out, out[-2000:]
    # the reply the client received never held it: a few kB went out, not 5 MB
    assert int(admin.info("stats")["total_net_output_bytes"]) - before < SIZE // 10
    assert planted(admin) == 2  # this key's removed, the others' left
    assert f"key {key}: a member of {SIZE:,} bytes" in caplog.text
    # removed by the first listing: the second makes no removal
    left = planted(admin)
    admin.config_resetstat()
    code, out = run(capsys, *argv)
    assert code == 0 and good in out
    assert "cmdstat_zrem" not in admin.info("commandstats")
    assert planted(admin) == left == 2


@pytest.mark.parametrize("path,good", [("/dead", "dead-good"), ("/scheduled", "delayed-good"),
                                       ("/running", "lease-good"), ("/", "default")])
def test_the_dashboard_listings_never_send_an_overlong_member(
        app: Minitask, admin: "redis.Redis[bytes]", path: str, good: str) -> None:
    dashboard = Dashboard(app)
    before = int(admin.info("stats")["total_net_output_bytes"])
    status, body = get(dashboard, path)
    assert status == "200 OK", body[:2000]
    assert len(body) < MOST and good in body, len(body)
    if path != "/":
        assert int(admin.info("stats")["total_net_output_bytes"]) - before < SIZE // 10
        assert planted(admin) == 2
        admin.config_resetstat()
        status, body = get(dashboard, path)
        assert status == "200 OK" and good in body
        assert "cmdstat_zrem" not in admin.info("commandstats")


FAIR = queue_keys("held", "fair")


@pytest.mark.parametrize("where", ["status", "/section/groups", "/api/queues", "/metrics"])
def test_a_group_name_longer_than_any_is_never_sent(
        app: Minitask, admin: "redis.Redis[bytes]", capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, where: str) -> None:
    admin.sadd(AppKeys("held").queues, "fair")
    admin.zadd(FAIR.groups, {b"G" * SIZE: 3, b"tenant-good": 2})
    admin.set(FAIR.groups_ready, 5)

    def look() -> str:
        if where == "status":
            code, out = run(capsys, "status", "-A", APP)
            assert code == 0, out[-2000:]
            return out
        status, body = get(Dashboard(app), where)
        assert status == "200 OK", body[:2000]
        return body

    before = int(admin.info("stats")["total_net_output_bytes"])
    out = look()
    assert len(out) < MOST, len(out)
    assert int(admin.info("stats")["total_net_output_bytes"]) - before < SIZE // 10
    assert admin.zscore(FAIR.groups, b"G" * SIZE) is None
    assert admin.zscore(FAIR.groups, b"tenant-good") == 2
    admin.config_resetstat()
    look()
    assert "cmdstat_zrem" not in admin.info("commandstats")


def test_dead_letters_and_the_next_due_time_never_read_an_overlong_member(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    before = int(admin.info("stats")["total_net_output_bytes"])
    assert [letter.task_id for letter in app.dead_letters(limit=10)] == ["dead-good"]
    assert app.broker.dead.ids("default", 10) == [b"dead-good"]
    assert app.broker.admin.next_due_ms("default") is not None
    assert int(admin.info("stats")["total_net_output_bytes"]) - before < SIZE // 10
    assert planted(admin) == 1  # the dead and delayed ones removed; the lease left
