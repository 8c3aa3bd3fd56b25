"""The dashboard's actions (minitask/dashboard/actions.py) on fakeredis: each asks to
confirm on a page of its own before it acts, needs the CSRF token at both steps, does
what the CLI command of the same name does, and goes back to a page of this site
only. Stopping a running task in a real browser: tests/integration/
test_dashboard_browser.py."""
from __future__ import annotations

import re
from typing import Dict, Tuple
from urllib.parse import quote

import pytest

from minitask import Minitask
from minitask.dashboard.actions import back_to
from minitask.dashboard.views import listing
from minitask.dashboard.web import Dashboard
from tests.support.draining import drain
from tests.unit.test_dashboard import call, seeded  # noqa: F401  (a fixture)


@pytest.fixture
def shop(seeded: Tuple[Minitask, Dict[str, str]]  # noqa: F811  (the fixture)
         ) -> Tuple[Minitask, Dict[str, str]]:
    """test_dashboard's app (a dead letter, two ready emails, one scheduled), and
    the ids of one ready and the scheduled task."""
    app, ids = seeded
    send = next(task for name, task in app.tasks.items() if name.endswith(".send"))
    later = listing(app, "scheduled", None, None, None, 1)["tasks"][0]["task_id"]
    return app, {**ids, "ready": send.delay("d").id, "later": later}


def fields(page: str) -> Dict[str, str]:
    """The hidden fields of the confirmation's form."""
    form = page[page.index('<form id="confirm"'):]
    form = form[:form.index("</form>")]
    return dict(re.findall(r'name="([a-z_]+)" value="([^"]*)"', form))


def confirm(dashboard: Dashboard, path: str, form: str) -> Tuple[str, Dict[str, str], str]:
    """Post ``form``, check that it asked to confirm, then confirm as the page does."""
    status, _, page = call(dashboard, path, "POST", f"{form}&csrf={dashboard.csrf_token}")
    assert status == "200 OK" and 'id="question"' in page, page
    carried = fields(page)
    assert carried["confirm"] == "yes" and carried["csrf"] == dashboard.csrf_token
    body = "&".join(f"{name}={quote(value)}" for name, value in carried.items())
    return call(dashboard, path, "POST", body)


def test_cancel_asks_first_then_withdraws_the_task_and_says_so(
        shop: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = shop
    dashboard = Dashboard(app)
    status, _, page = call(dashboard, "/actions/cancel", "POST",
                           f"task_id={ids['later']}&back=/scheduled&csrf={dashboard.csrf_token}")
    assert status == "200 OK"
    assert f"Task {ids['later']} is scheduled" in page and "never runs" in page
    assert 'href="/scheduled"' in page  # "no, go back"
    assert app.handle(ids["later"]).status() == "scheduled"  # asking changed nothing

    status, headers, _ = confirm(dashboard, "/actions/cancel",
                                 f"task_id={ids['later']}&back=/scheduled")
    assert status == "303 See Other"
    assert headers["Location"].startswith("/scheduled?notice=")
    assert app.handle(ids["later"]).status() == "cancelled"
    after = call(dashboard, headers["Location"])[2]
    assert f"cancelled {ids['later']}" in after
    # again: it is cancelled already, and the notice says so
    _, headers, _ = confirm(dashboard, "/actions/cancel", f"task_id={ids['later']}")
    assert headers["Location"].startswith("/?notice=")
    assert f"{ids['later']} was cancelled already" in call(dashboard, headers["Location"])[2]


def test_every_action_needs_the_token_at_both_steps(
        shop: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = shop
    dashboard = Dashboard(app)
    for path, form in (("/actions/cancel", f"task_id={ids['ready']}&running=1"),
                       ("/actions/requeue", f"task_id={ids['dead']}"),
                       ("/actions/purge-dead", f"task_id={ids['dead']}"),
                       ("/actions/purge", "queue=emails")):
        for step in (form, form + "&confirm=yes"):
            assert call(dashboard, path, "POST", step)[0] == "403 Forbidden", path
            assert call(dashboard, path, "POST", step + "&csrf=guess")[0] == "403 Forbidden"
            assert call(dashboard, f"{path}?{step}&csrf={dashboard.csrf_token}"
                        )[0] == "404 Not Found"  # a GET is no action
    assert app.handle(ids["ready"]).status() == "queued"
    assert app.handle(ids["dead"]).status() == "failed"
    asked = call(dashboard, "/actions/cancel", "POST",
                 f"task_id={ids['ready']}&running=1&csrf={dashboard.csrf_token}")[2]
    assert "<h1>Stop the task?</h1>" in asked and "never retried" in asked
    assert app.broker.queues.counts("emails")["ready"] == 3


def test_requeue_purge_and_delete_ready_do_what_the_cli_does(
        shop: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = shop
    dashboard = Dashboard(app)
    page = call(dashboard, "/actions/purge", "POST",
                f"queue=emails&csrf={dashboard.csrf_token}")[2]
    assert "The 3 ready task(s) of queue &#39;emails&#39;" in page
    status, headers, _ = confirm(dashboard, "/actions/purge", "queue=emails&back=/")
    assert status == "303 See Other"
    assert app.broker.queues.counts("emails")["ready"] == 0
    assert app.broker.queues.counts("emails")["scheduled"] == 1  # scheduled ones stay
    assert "deleted 3 ready task(s)" in call(dashboard, headers["Location"])[2]
    for bad in ("nosuch", "bad{name"):
        assert call(dashboard, "/actions/purge", "POST",
                    f"queue={quote(bad)}&csrf={dashboard.csrf_token}")[0] == "400 Bad Request"

    confirm(dashboard, "/actions/requeue", f"task_id={ids['dead']}")
    assert app.handle(ids["dead"]).status() == "queued" and app.dead_letters() == []
    drain(app.worker(["default"]))
    assert len(app.dead_letters()) == 1
    status, headers, _ = confirm(dashboard, "/actions/purge-dead",
                                 f"task_id={ids['dead']}&back=/dead")
    assert headers["Location"].startswith("/dead?notice=")
    assert app.dead_letters() == []
    assert "purged 1 dead letter(s)" in call(dashboard, headers["Location"])[2]
    assert call(dashboard, "/actions/requeue", "POST",
                f"csrf={dashboard.csrf_token}")[0] == "400 Bad Request"  # no task named


def test_the_pages_offer_the_actions_that_fit(shop: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = shop
    dashboard = Dashboard(app)
    scheduled = call(dashboard, "/scheduled")[2]
    assert 'action="/actions/cancel"' in scheduled and dashboard.csrf_token in scheduled
    recent = call(dashboard, "/recent")[2]
    assert 'action="/actions/requeue"' in recent and 'action="/actions/purge-dead"' in recent
    assert 'action="/actions/cancel"' not in recent
    dead_task = call(dashboard, f"/task/{ids['dead']}")[2]
    assert 'action="/actions/requeue"' in dead_task and "/actions/cancel" not in dead_task
    queued_task = call(dashboard, f"/task/{ids['ready']}")[2]
    assert 'action="/actions/cancel"' in queued_task and 'name="running"' not in queued_task
    assert f'value="/task/{ids["ready"]}"' in queued_task
    assert 'action="/actions/purge"' in call(dashboard, "/")[2]


@pytest.mark.parametrize("given, back", [
    ("/running", "/running"), ("/task/a b", "/task/a%20b"), ("/task/a%2Fb", "/task/a%2Fb"),
    ("/recent?state=dead", "/recent"), ("https://evil.example/", "/"),
    ("//evil.example/x", "/"), ("/\\evil.example", "/"), ("javascript:alert(1)", "/"),
    ("", "/")])
def test_an_action_goes_back_to_a_page_of_this_site_only(given: str, back: str) -> None:
    assert back_to({"back": [given]}) == back
