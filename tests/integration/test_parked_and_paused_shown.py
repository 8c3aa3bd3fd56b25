"""Ready tasks no worker takes yet are shown as such (probe's M5 and L5, issue 29's
"what a person reads is true"), on the suite's redis-server: ``minitask status`` and
the dashboard's queues page say how many are parked by their limits and which groups
are paused (a count, then at most ``PAUSED_SHOWN`` names), ``inspect`` of a task of a
paused group says so; planted entries in the groups set are not counted as groups, and
the grouped ready tasks are counted from the groups when the counter is gone."""
from __future__ import annotations

import contextlib
import io
import json
import time
from typing import Any, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.admin.queues import PAUSED_SHOWN
from minitask.broker.keys import queue_keys
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from tests.apps.held import build
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.held"
FAIR = queue_keys("held", "fair")


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def _task_page(dashboard: Dashboard, task_id: str) -> Tuple[str, str]:
    """The dashboard's page of one task (``/task?id=``)."""
    seen: Dict[str, str] = {}

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen["status"] = status

    environ: Dict[str, Any] = {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/task", "QUERY_STRING": f"id={task_id}",
        "wsgi.input": io.BytesIO(b""), "CONTENT_LENGTH": "0", "HTTP_HOST": "127.0.0.1:5555"}
    body = b"".join(dashboard(environ, start_response)).decode()
    return seen["status"], body


def _park_four(app: Minitask) -> None:
    """Six heavy tasks, two leased by a fetch: the other four parked by max_running."""
    app.tasks["heavy"].delay_many([(n,) for n in range(6)])
    fetched = app.broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                      lease_ms=600_000, count=10, max_deliveries=5)
    assert len(fetched.deliveries) == 2
    assert app.broker.flow.parked("default") == 4


def _pause_pz(app: Minitask, tasks: int = 4) -> List[str]:
    app.pause_group("fair", "pz")
    return [app.tasks["job"].delay("pz", n).id for n in range(tasks)]


def test_status_text_says_how_many_ready_tasks_are_parked_and_which_groups_are_paused(
        app: Minitask) -> None:
    _park_four(app)
    _pause_pz(app)
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "4 of them parked by their limits" in said, said
    assert "4 ready in 1 group(s); largest: pz=4 (paused)" in said, said
    assert "1 paused group(s), held until resume_group: pz=4" in said, said
    code, out = cli("status", "-A", APP, "--json")
    report = json.loads(out)
    assert report["queues"]["fair"]["paused_groups"] == 1
    assert report["queues"]["fair"]["paused_shown"] == [["pz", 4]]
    assert report["queues"]["default"]["parked"] == 4


def test_the_queues_page_says_what_is_parked_and_paused(app: Minitask) -> None:
    _park_four(app)
    _pause_pz(app)
    dashboard = Dashboard(app)
    for path in ("/", "/queues"):
        status, page = get(dashboard, path)
        assert status.startswith("200"), (path, status)
        assert "parked by their limits: 4" in page, page
        assert "1 paused group(s): pz=4" in page, page


def test_inspect_of_a_task_of_a_paused_group_says_the_group_is_paused(
        app: Minitask) -> None:
    held = _pause_pz(app, 1)[0]
    code, said = cli("inspect", "-A", APP, held)
    assert code == 0, said
    assert "status       queued (group 'pz' is paused)" in said, said
    status, page = _task_page(Dashboard(app), held)
    assert status.startswith("200") and "(group &#39;pz&#39; is paused)" in page, page
    app.resume_group("fair", "pz")
    code, said = cli("inspect", "-A", APP, held)
    assert "status       queued\n" in said, said


def test_paused_groups_are_a_count_and_a_bounded_list_of_names(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.sadd(FAIR.groups_paused, *[f"g{n:05d}" for n in range(5000)])
    counts = queue_counts(app, "fair")
    assert counts["paused_groups"] == 5000
    assert 0 < len(counts["paused_shown"]) <= PAUSED_SHOWN
    code, said = cli("status", "-A", APP)
    assert "5000 paused group(s), held until resume_group: g" in said, said
    assert f"and {5000 - len(counts['paused_shown'])} more" in said, said


def test_planted_group_entries_are_not_counted_and_a_lost_counter_is_derived(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    _pause_pz(app)
    for score, name in (("-inf", "a"), ("+inf", "b"), ("1e300", "c"), ("0", "d")):
        admin.execute_command("ZADD", FAIR.groups, score, name)
    code, said = cli("status", "-A", APP)
    assert "4 ready in 1 group(s); largest: pz=4 (paused)" in said, said
    admin.delete(FAIR.groups_ready)
    counts = queue_counts(app, "fair")
    assert (counts["ready"], counts["grouped"], counts["groups"]) == (4, 4, 1), counts
    code, said = cli("status", "-A", APP)
    assert "4 ready in 1 group(s); largest: pz=4 (paused)" in said, said
