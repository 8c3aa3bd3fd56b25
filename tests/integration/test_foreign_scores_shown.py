"""Scores and paths minitask did not write, on a real redis-server (issue 29): a
score of +inf, nan or 1e300 in a queue's groups set or the worker registry never
makes ``minitask status`` or a dashboard page fail, nor hides what is real beside
it; a path the browser sent as UTF-8 is shown as such, escaped."""
from __future__ import annotations

import contextlib
import io
import json
import re
import time
from typing import Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from minitask.stores.registry import SHOWN_AHEAD, SHOWN_WORKERS, TRUSTED_AHEAD_MS
from tests.apps.foreign import build
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
GROUPS = queue_keys("foreign", "other").groups
REGISTRY = AppKeys("foreign")


@pytest.fixture
def app(app: Minitask) -> Minitask:
    """tests.apps.foreign on the suite's redis-server (emptied), its queue "other" known."""
    app.broker.queues.register_queues(["other"])
    return app


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("score", ["+inf", "-inf", "1e300", "1.5", "99999999999999999999"])
def test_a_group_score_that_is_no_count_is_left_out_and_the_real_groups_are_shown(
        app: Minitask, admin: "redis.Redis[bytes]", score: str) -> None:
    admin.zadd(GROUPS, {"real": 3})
    admin.execute_command("ZADD", GROUPS, score, "x")
    counts = app.broker.flow.group_counts_many(["other"])["other"]
    # a score that is no count is no group (one of 1.5 is counted: only a read of each
    # entry could tell it, and the count is a ZCOUNT)
    assert counts["groups"] == (2 if score == "1.5" else 1), counts
    assert counts["largest_groups"] == [("real", 3)]
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    dashboard = Dashboard(app)
    for path in ("/", "/metrics", "/section/groups"):
        status, _ = get(dashboard, path)
        assert status.startswith("200"), (path, status)


def test_workers_planted_ahead_never_hide_the_live_ones(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    now_ms = int(time.time() * 1000)
    admin.zadd(REGISTRY.workers, {f"ghost{i}": float("inf") for i in range(SHOWN_WORKERS)})
    admin.zadd(REGISTRY.workers, {f"far{i}": now_ms + 10 ** 9 for i in range(SHOWN_WORKERS)})
    admin.zadd(REGISTRY.workers, {"real": now_ms})
    admin.hset(REGISTRY.worker("real"), mapping={"beat_ms": now_ms, "name": "real"})
    listed = app.broker.registry.listing(now_ms, 60_000)
    assert [worker["name"] for worker in listed.live] == ["real"] and listed.left_out == 0
    # far ahead, and with no record: no live worker's, listed apart (the first read
    # named, the rest counted); those at +inf, no time a worker writes, pruned
    assert listed.ahead == [] and len(listed.ahead_foreign) == SHOWN_AHEAD
    assert listed.ahead_left_out == SHOWN_WORKERS - SHOWN_AHEAD
    assert admin.zcard(REGISTRY.workers) == SHOWN_WORKERS + 1
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    assert [worker["name"] for worker in json.loads(said)["workers"]] == ["real"]
    status, metrics = get(Dashboard(app), "/metrics")
    assert status.startswith("200") and "minitask_workers 1" in metrics


def test_a_record_beating_far_ahead_is_listed_apart_with_its_skew_and_not_counted_live(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    # a record no worker renews, scored half an hour ahead: it was listed live until
    # its score passed (up to an hour ahead was taken for clock skew)
    now_ms = int(time.time() * 1000)
    beats = {"real": now_ms, "skewed": now_ms + TRUSTED_AHEAD_MS // 3,
             "ghost": now_ms + 1_800_000}
    for name, beat in beats.items():
        admin.zadd(REGISTRY.workers, {name: beat})
        admin.hset(REGISTRY.worker(name), mapping={
            "beat_ms": beat, "name": name, "host": "h1", "pid": 7, "queues": "other",
            "ahead_ms": "1"})  # a field of that name is no measure: never shown
    listed = app.broker.registry.listing(now_ms, 60_000)
    assert sorted(worker["name"] for worker in listed.live) == ["real", "skewed"]
    assert [(worker["name"], worker["ahead_ms"]) for worker in listed.ahead] == [
        ("ghost", "1800000")]
    assert listed.left_out == listed.ahead_left_out == 0
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    report = json.loads(said)
    assert sorted(worker["name"] for worker in report["workers"]) == ["real", "skewed"]
    (ghost,) = report["workers_ahead"]
    assert ghost["name"] == "ghost" and 1790 < ghost["ahead_s"] <= 1800
    code, said = cli("status", "-A", APP)
    assert code == 0 and "2 live worker(s)" in said, said
    assert (f"1 worker record(s) with a heartbeat more than {TRUSTED_AHEAD_MS // 1000} s "
            f"ahead of this machine's clock, not counted live") in said
    # 1,800 s ahead when it was planted, less the time the CLI took to start
    assert re.search(r"  ghost  heartbeat (17[0-9][0-9]|1800)\.[0-9] s ahead  host h1  pid 7",
                     said), said
    dashboard = Dashboard(app)
    status, metrics = get(dashboard, "/metrics")
    assert status.startswith("200") and "minitask_workers 2" in metrics
    status, page = get(dashboard, "/workers")
    assert status.startswith("200") and "Clock ahead: not counted live" in page
    assert 'id="workers-ahead"' in page and "ghost" in page.partition("workers-ahead")[2]
    assert "ghost" not in page.partition("workers-ahead")[0]


def test_a_worker_whose_clock_runs_ahead_can_still_be_stopped_by_name(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    # listed "clock ahead", not counted live: yet it may be a real worker, and an
    # operator must be able to stop it
    now_ms = int(time.time() * 1000)
    admin.zadd(REGISTRY.workers, {"fast-1": now_ms + 120_000})
    admin.hset(REGISTRY.worker("fast-1"), mapping={"beat_ms": now_ms + 120_000,
                                                   "name": "fast"})
    code, said = cli("shutdown", "-A", APP, "fast")
    assert code == 0 and "asked worker fast (fast-1) to stop" in said, said
    assert admin.lrange(REGISTRY.control("fast-1"), 0, -1) == [b"shutdown"]


def test_names_left_out_of_a_listing_are_counted_in_its_not_shown_figure(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    # names over 300 characters (or not UTF-8) were left out and counted nowhere
    now_ms = int(time.time() * 1000)
    admin.sadd(REGISTRY.queues, "q" * 301, b"\xff")
    admin.zadd(REGISTRY.workers, {"w" * 301: now_ms, "real": now_ms})
    admin.hset(REGISTRY.worker("real"), mapping={"beat_ms": now_ms, "name": "real"})
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    report = json.loads(said)
    assert report["queues_left_out"] == 2 and report["workers_left_out"] == 1
    assert [worker["name"] for worker in report["workers"]] == ["real"]
    code, said = cli("status", "-A", APP)
    assert "... and 2 more queue(s) in the app's queue registry, not shown" in said
    assert "... and 1 more in the worker registry, not shown" in said
    dashboard = Dashboard(app)
    assert "and 2 more queue(s) in the app's queue registry" in get(dashboard, "/")[1]
    assert "and 1 more in the worker registry, not shown" in get(dashboard, "/workers")[1]


def test_the_worker_404_page_reads_the_path_as_utf8_and_escapes_it(app: Minitask) -> None:
    status, text = get(Dashboard(app), "/worker/w1\x1b[31m\u202e")
    assert status.startswith("404")
    assert "w1\\x1b[31m\\u202e" in text, text
    assert "\u202e" not in text and "\x1b" not in text and "\u00e2" not in text
