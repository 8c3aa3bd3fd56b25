"""The dashboard's running, scheduled and recent tabs and its worker page, called
directly on fakeredis: filters, paging, human times, progress bars, hidden
arguments, escaping and the one script the Content-Security-Policy allows; the
browser test (live updates) is in tests/integration/test_dashboard_browser.py."""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Callable, Tuple

import pytest

from minitask import Minitask
from minitask.dashboard.web import Dashboard, duration, relative
from minitask.wire.serializer import pack_progress
from tests.support.draining import drain
from tests.unit.test_dashboard import SCRIPT, call
from tests.unit.test_operators_view import Tasks, tasks_of


@pytest.fixture
def shop(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Tasks]:
    app = make_app("shop")
    return app, tasks_of(app)


def lease_all(app: Minitask, queue: str = "default") -> None:
    app.broker.queues.fetch(queue, now_ms=app.clock.now_ms(), lease_ms=30_000, count=100,
                            max_deliveries=5)


def api(dashboard: Dashboard, path: str) -> Any:
    status, headers, text = call(dashboard, "/api/" + path)
    assert status == "200 OK" and headers["Content-Type"] == "application/json", (path, text)
    return json.loads(text)


def test_each_tab_is_a_page_linked_from_the_menu_with_rows_linking_to_the_task(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    scheduled = tasks["add"].apply_in(120, 1, 2)
    tasks["send"].delay("a@b")
    drain(app.worker(["mail"]))
    running = tasks["add"].delay(3, 4)
    lease_all(app)
    dashboard = Dashboard(app)
    for tab, task_id in (("running", running.id), ("scheduled", scheduled.id)):
        status, _, page = call(dashboard, "/" + tab)
        assert status == "200 OK", tab
        assert f'<a href="/{tab}">' in page
        assert f'<a href="/task/{task_id}">{task_id}</a>' in page, tab
    page = call(dashboard, "/scheduled")[2]
    assert "in 2 min" in page  # due in 120 s, by the app's clock
    page = call(dashboard, "/recent")[2]
    assert "mail.send" in page and 'class="state state-succeeded"' in page


def test_the_tabs_search_by_glob_id_queue_and_state_and_page(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    for n in range(5):
        tasks["add"].delay(n, n)
    boom = tasks["boom"].delay()
    tasks["send"].delay("a@b")
    drain(app.worker(["default", "mail"]))
    dashboard = Dashboard(app)
    failed = api(dashboard, "recent?task=shop.b*&state=failed")
    assert [(t["task_id"], t["state"]) for t in failed["tasks"]] == [(boom.id, "dead")]
    assert "shop.boom" in call(dashboard, "/recent?task=shop.b*&state=failed")[2]
    assert [t["task_id"] for t in api(dashboard, f"recent?id={boom.id}")["tasks"]] == [boom.id]
    assert [t["name"] for t in api(dashboard, "recent?queue=mail")["tasks"]] == ["mail.send"]
    both = api(dashboard, "recent?queue=mail,default&limit=50")["tasks"]
    assert len(both) == 7 == len(api(dashboard, "recent?queue=mail&queue=default")["tasks"])
    # pages of two: 7 outcomes, newest first, each once, the last page has no next
    seen = []
    offset: Any = 0
    while offset is not None:
        page = api(dashboard, f"recent?limit=2&offset={offset}")
        assert len(page["tasks"]) <= 2
        seen += [t["task_id"] for t in page["tasks"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == 7
    assert seen == [t["task_id"] for t in api(dashboard, "recent?limit=50")["tasks"]]
    html = call(dashboard, "/recent?limit=2")[2]
    assert re.search(r'id="next" href="/recent\?[^"]*offset=2', html)
    for bad in ("recent?offset=-1", "recent?offset=x", "recent?limit=501"):
        assert call(dashboard, "/api/" + bad)[0].startswith("400"), bad


def test_a_running_task_shows_its_progress_as_a_bar_and_hidden_arguments_stay_hidden(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    crunch = tasks["add"].delay(SCRIPT, 1)
    secret = tasks["login"].delay("ann", "hunter2")
    lease_all(app)
    app.broker.progress.write([("default", crunch.id, pack_progress(22, 100, "crunching",
                                                                    app.clock.now_ms()),
                                60_000)])
    dashboard = Dashboard(app)
    rows = {t["task_id"]: t for t in api(dashboard, "running")["tasks"]}
    assert rows[crunch.id]["progress"]["current"] == 22
    assert rows[crunch.id]["progress"]["total"] == 100
    assert rows[secret.id]["progress"] is None
    page = call(dashboard, "/running")[2]
    assert '<progress max="100" value="22"></progress>' in page
    assert "hunter2" not in page and "(hidden)" in page
    assert SCRIPT not in page and "&lt;script&gt;" in page
    assert "hunter2" not in json.dumps(api(dashboard, "running"))


def test_the_page_script_is_the_one_the_policy_allows_by_its_hash(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, _ = shop
    dashboard = Dashboard(app)
    _, headers, page = call(dashboard, "/running")
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = headers["Content-Security-Policy"]
    assert f"script-src 'sha256-{digest}'" in policy
    assert "connect-src 'self'" in policy
    assert "innerHTML" not in script and "eval" not in script  # text nodes only
    # the other pages run no script at all
    assert "<script" not in call(dashboard, "/dead")[2]


def test_a_worker_page_shows_its_counts_and_outcomes_with_numbers_in_json(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    tasks["add"].delay(1, 1)
    tasks["boom"].delay()
    worker = app.worker(["default"], name="w9")
    drain(worker)
    worker.beat()
    dashboard = Dashboard(app)
    (listed,) = api(dashboard, "workers")["workers"]
    for name in (listed["name"], listed["id"]):
        found = api(dashboard, f"worker/{name}")
        assert found["name"] == "w9"
        assert (found["processed"], found["failed"]) == (1, 1)  # succeeded, failed
        for field in ("processed", "failed", "concurrency", "pid", "running", "recycled"):
            assert type(found[field]) is int, field
        assert sorted(t["state"] for t in found["recent"]) == ["dead", "succeeded"]
    status, _, page = call(dashboard, "/worker/w9")
    assert status == "200 OK" and '<td class="n" id="processed">1</td>' in page
    assert f'href="/worker/{listed["id"]}"' in call(dashboard, "/workers")[2]
    assert call(dashboard, "/worker/nobody")[0].startswith("404")


@pytest.mark.parametrize("seconds, text", [(None, ""), (0.25, "250 ms"), (0, "0 s"),
                                           (59.9, "59 s"), (120, "2 min"),
                                           (7200, "2 h"), (2 * 86400, "2 d")])
def test_durations_read_as_people_say_them(seconds: Any, text: str) -> None:
    assert duration(seconds) == text


def test_times_are_relative_to_the_servers_now() -> None:
    now = "2026-11-28T10:00:00+00:00"
    assert relative("2026-11-28T09:59:57+00:00", now) == "3 s ago"
    assert relative("2026-11-28T10:02:00+00:00", now) == "in 2 min"
    assert relative(now, now) == "now"
    assert relative(None, now) == ""


def test_the_task_page_shows_times_relative_and_progress_as_a_bar(
        shop: Tuple[Minitask, Tasks]) -> None:
    app, tasks = shop
    crunch = tasks["add"].delay(1, 2)
    lease_all(app)
    app.broker.progress.write([("default", crunch.id, pack_progress(3, 4, None,
                                                                    app.clock.now_ms()),
                                60_000)])
    page = call(Dashboard(app), f"/task/{crunch.id}")[2]
    assert '<progress max="4" value="3"></progress>' in page
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">in 30 s</time>', page)  # lease
    assert ">now</time>" in page  # enqueued at the app's clock's now
