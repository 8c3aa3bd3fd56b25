"""``minitask status`` names every worker record it counts as ahead (probe 29h, L3): a
registry member scored far ahead with no worker name (a control character in it) or
no record was counted ("1 worker record(s) ... ahead") and shown nowhere ("... and 1
more, not shown"); now each read is shown, escaped, with why. A member scored past
the year 9999 (+inf, 1e300: no heartbeat a worker writes) stayed for ever; it is
pruned as a stale one is (a real redis-server)."""
from __future__ import annotations

import contextlib
import io
import json
import time
from typing import Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
REGISTRY = AppKeys("foreign")
PLANTED = b"wnan\x1b]0;x\x07"
SHOWN = "wnan\\x1b]0;x\\x07"


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("score", ["+inf", "1e300"])
def test_a_member_scored_past_any_time_is_pruned(
        app: Minitask, admin: "redis.Redis[bytes]", score: str) -> None:
    admin.execute_command("ZADD", REGISTRY.workers, score, PLANTED)
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "not shown" not in said and "\x1b" not in said, said
    assert admin.zscore(REGISTRY.workers, PLANTED) is None  # gone: not "ahead" for ever


def test_a_member_ahead_with_no_worker_name_is_shown_escaped(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.zadd(REGISTRY.workers, {PLANTED: int(time.time() * 1000) + 3_600_000})
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "1 worker record(s) with a heartbeat more than 15 s ahead" in said, said
    assert "not shown" not in said and "\x1b" not in said and "\x07" not in said, said
    (line,) = [line for line in said.splitlines() if SHOWN in line]
    assert " s ahead  no worker name: no worker wrote this member" in line, line
    code, said = cli("status", "-A", APP, "--json")
    report = json.loads(said)
    assert report["workers_ahead"] == [] and report["workers_ahead_left_out"] == 0
    (member,) = report["workers_ahead_foreign"]
    assert member["member"] == SHOWN and member["why"] == "no worker name"
    assert 3500 < member["ahead_s"] <= 3600
    status, page = get(Dashboard(app), "/workers")
    assert status.startswith("200") and SHOWN in page and "no worker name" in page


def test_a_worker_name_ahead_with_no_record_is_shown(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.zadd(REGISTRY.workers, {"ghost": int(time.time() * 1000) + 3_600_000})
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "not shown" not in said, said
    (line,) = [line for line in said.splitlines() if "ghost" in line]
    assert "no worker record: no worker wrote this member" in line, line
    # an order is never left for it: shutdown counts no worker
    stoppable = [w["id"] for w in app.broker.registry.listing(
        int(time.time() * 1000), 60_000).ahead]
    assert stoppable == []
