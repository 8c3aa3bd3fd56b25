"""Huge names planted in Redis are shown cut, never whole (issue 29, probe 17's M4), on
the suite's redis-server: a fair queue's group of 500,000 characters, a paused group of
100,000, and worker records (live, and with a heartbeat an hour ahead) naming a worker
of 2 MB serving a queues list of 200 kB made ``minitask status`` print 2.8 MB and the
dashboard's pages answer 2.2 MB; so did members of a lease or delayed set and a recent
outcome of a megabyte in ``minitask inspect`` and the dashboard's listings. Each is now
cut as ``shown_id`` cuts an id (head and tail around its length), and the good entries
beside them are still shown."""
from __future__ import annotations

import json
import time
from typing import Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.recent import pack_entry
from tests.apps.held import build
from tests.support.cli import run
from tests.support.pages import get
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "tests.apps.held"
FAIR = queue_keys("held", "fair")
REGISTRY = AppKeys("held")
#: What any output here may weigh at most: the planted values are 100 kB to 2 MB each.
MOST = 40_000
HUGE_GROUP = "x" * 500_000
HUGE_PAUSED = "y" * 100_000
HUGE_NAME = "n" * 2_000_000
HUGE_QUEUES = "default," + "q" * 200_000


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    """tests.apps.held on the suite's redis-server (emptied), with the huge values and
    good entries beside them planted."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    made = build(redis_server.url)
    admin.sadd(REGISTRY.queues, "fair", "default")
    admin.zadd(FAIR.groups, {HUGE_GROUP: 7, "tenant-good": 3})
    admin.set(FAIR.groups_ready, 10)
    admin.sadd(FAIR.groups_paused, HUGE_PAUSED, "paused-good")
    now_ms = int(time.time() * 1000)
    for member, beat_ms, fields in (
            ("w-good", now_ms, {"name": "good-worker", "queues": "default,fair"}),
            ("w-big", now_ms, {"name": HUGE_NAME, "queues": HUGE_QUEUES,
                               "host": "h" * 100_000, "pool": "p" * 100_000,
                               "running_ids": json.dumps(["i" * 30_000, "ok-id"])}),
            ("w-ahead", now_ms + 3_600_000, {"name": HUGE_NAME, "queues": HUGE_QUEUES,
                                             "host": "h" * 100_000})):
        admin.zadd(REGISTRY.workers, {member: beat_ms})
        admin.hset(REGISTRY.worker(member), mapping={"beat_ms": beat_ms, "pid": 7,
                                                     "processed": 0, **fields})
    yield made
    made.close()


def test_status_shows_planted_groups_and_workers_cut_and_the_good_entries(
        app: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "status", "-A", APP)
    assert code == 0
    assert len(out) < MOST, len(out)
    assert "tenant-good=3" in out and "paused-good=0" in out, out
    assert "good-worker" in out and "queues default,fair" in out, out
    # a group name longer than any minitask writes is removed unsent (groups_top.lua)
    assert "[cut: 500,000" not in out and "x" * 1000 not in out, out
    # so is a paused group's (paused_page.lua)
    assert "[cut: 100,000" not in out and "y" * 1000 not in out, out
    # a worker record's field longer than minitask writes is not read at all (its
    # record is shown by its member, the field as "?"), live and clock ahead alike
    assert "w-big  heartbeat" in out and "w-ahead  heartbeat" in out, out
    assert "queues ?" in out and "n" * 1000 not in out and "q" * 1000 not in out, out
    code, out = run(capsys, "status", "-A", APP, "--json")
    assert code == 0
    assert len(out) < MOST, len(out)
    report = json.loads(out)
    assert {worker["name"] for worker in report["workers"]} >= {"good-worker"}
    assert all(len(worker["name"]) < 400 for worker in
               report["workers"] + report["workers_ahead"])
    groups = dict(report["queues"]["fair"]["largest_groups"])
    assert groups["tenant-good"] == 3 and len(groups) == 1
    assert ["paused-good", 0] in report["queues"]["fair"]["paused_shown"]


@pytest.mark.parametrize("path", ["/", "/api/", "/workers", "/api/workers",
                                  "/worker/w-big", "/api/worker/w-big",
                                  "/section/groups", "/api/section/groups"])
def test_dashboard_pages_show_planted_names_cut_and_the_good_entries(
        app: Minitask, path: str) -> None:
    status, body = get(Dashboard(app), path)
    assert status == "200 OK", body[:2000]
    assert len(body) < MOST, len(body)
    if path == "/api/" or "groups" in path:  # the queues page names the paused only
        assert "tenant-good" in body, body
    if path.endswith("/"):
        assert "paused-good" in body, body
    if path.endswith("workers"):
        assert "good-worker" in body and "default,fair" in body, body
    if "/worker/" in path:
        assert "ok-id" in body and "[cut: 30,000 characters in all]" in body, body


def test_shutdown_names_live_workers_cut_when_none_is_named_so(
        app: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "shutdown", "-A", APP, "nobody")
    assert code == 1
    assert len(out) < MOST, len(out)
    assert "good-worker" in out and "w-big" in out, out


def test_a_wait_that_runs_out_names_the_live_workers_cut(app: Minitask) -> None:
    handle = app.tasks["heavy"].delay(1)
    with pytest.raises(TimeoutError) as caught:
        handle.get(timeout=0.2)
    said = str(caught.value)
    assert len(said) < MOST, len(said)
    assert "good-worker" in said or "live worker(s) serve queue" in said, said


def _plant_tasks(client: "redis.Redis[bytes]") -> None:
    """Members of a lease set and a delayed set of 800,000 characters, and a recent
    outcome whose id, name, worker and error are 300 kB to 1 MB; good ones beside."""
    default = queue_keys("held", "default")
    now_ms = int(time.time() * 1000)
    client.xadd(default.recent, {"e": pack_entry("T" * 1_000_000, "N" * 500_000, "succeeded",
                                                 now_ms, 1, 0.5, HUGE_NAME, "E" * 300_000)})
    client.xadd(default.recent, {"e": pack_entry("good-id", "heavy", "succeeded", now_ms, 1,
                                                 0.5, "good-worker", "")})
    score = (now_ms + 600_000) * 10
    client.zadd(default.leases, {"L" * 800_000: score, "lease-good": score})
    client.zadd(default.delayed, {"D" * 800_000: score, "delayed-good": score})


@pytest.mark.parametrize("which,good", [("recent", "good-id"), ("running", "lease-good"),
                                        ("scheduled", "delayed-good")])
def test_inspect_and_the_dashboard_list_planted_tasks_cut(
        app: Minitask, admin: "redis.Redis[bytes]", which: str, good: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    _plant_tasks(admin)
    for argv in (("inspect", "-A", APP, which), ("inspect", "-A", APP, which, "--json")):
        code, out = run(capsys, *argv)
        assert code == 0
        assert len(out) < MOST, len(out)
        assert good in out, out
    dashboard = Dashboard(app)
    for path in (f"/{which}", f"/api/{which}", "/worker/w-good"):
        status, body = get(dashboard, path)
        assert status == "200 OK", body[:2000]
        assert len(body) < MOST, len(body)
        assert (good if path != "/worker/w-good" else "good-id") in body, body
