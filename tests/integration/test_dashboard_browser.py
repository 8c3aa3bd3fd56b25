"""The dashboard in headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven through selenium), served from this process for a seeded app on the
suite's own redis-server. Every page is screenshotted into the test's tmp dir;
with MINITASK_DOCS_SCREENSHOT=1 the queue page's goes to docs/dashboard-queues.png,
and the running, scheduled, recent and worker pages' (a real worker process on
tests.apps.ops) to docs/dashboard-running.png, -scheduled.png, -recent.png and
-worker.png.
"""
from __future__ import annotations

import base64
import dataclasses
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.dashboards import serving
from minitask.printable import printable
from minitask.wire.serializer import decode_message, encode_message
from tests.support.paths import ROOT
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = ("headless Chromium is not installed: as root, run "
           "`apt-get install -y chromium chromium-driver` (Debian; .ci/run does) and "
           "`pip install selenium` (in the dev extra)")
AUTH = "admin:s3cret"
SCRIPT = "<script>alert(1)</script>"


def browser_or_skip() -> Any:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(INSTALL)
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip(INSTALL)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    # basic auth on every request of the page, as a browser that has logged in sends it
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {
        "Authorization": "Basic " + base64.b64encode(AUTH.encode()).decode()}})
    return driver


@pytest.fixture
def seeded(redis_server: RedisServer, admin: "redis.Redis[bytes]"
           ) -> Iterator[Tuple[Minitask, Dict[str, str]]]:
    """An app with tasks ready at two priorities, one scheduled, some done, and a dead
    letter whose argument is a script tag."""
    app = Minitask("shop", broker=redis_server.url)

    @app.task(retries=0)
    def charge(note: str) -> None:
        raise ValueError(f"card declined for {note}")

    @app.task
    def resize(index: int) -> int:
        return index

    @app.task(queue="emails")
    def send(to: str) -> None:
        pass

    @app.task(queue="config", broadcast=True)
    def reload(version: int) -> None:
        pass

    resize.delay_many([(i,) for i in range(5)])
    dead = charge.delay(SCRIPT)
    app.worker(["default"], burst=True).run()  # the burst worker adds its counts as it stops
    send.apply_async(("a@example.com",), priority=9)
    for index in range(3):
        send.apply_async((f"{index}@example.com",), priority=2)
    send.apply_async(("later@example.com",), delay=3600)
    app.add_schedule(f"nightly-{SCRIPT}", send, cron="0 3 * * *", args=("ops@example.com",))
    now_ms = app.clock.now_ms()
    app.broker.broadcasts.subscribe("config", "web-1", now_ms)
    reload.delay(2)
    app.broker.registry.heartbeat("box-7", {
        "pid": 4242, "host": "box", "queues": "default,emails", "pool": "process",
        "concurrency": 2, "processed": 6, "failed": 1, "running": 0, "beat_ms": now_ms},
        now_ms, ttl_ms=600_000)  # a live worker, as its heartbeat says
    try:
        yield app, {"dead": dead.id}
    finally:
        app.close()


@pytest.fixture
def site(seeded: Tuple[Minitask, Dict[str, str]]) -> Iterator[str]:
    app, _ = seeded
    with serving(app, auth=AUTH) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = browser_or_skip()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def ops_site(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The dashboard of tests.apps.ops on a flushed suite server."""
    import tests.apps.ops as ops
    client = redis_server.client()
    client.flushall()
    client.close()
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    ops.app.close()  # connect again, to this server
    try:
        with serving(ops.app, auth=AUTH) as server:
            yield f"http://127.0.0.1:{server.server_port}"
    finally:
        ops.app.close()


def status_of(url: str, data: bytes | None = None, auth: str | None = None) -> int:
    request = urllib.request.Request(url, data=data)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_dashboard_in_a_real_browser(
        seeded: Tuple[Minitask, Dict[str, str]], site: str, browser: Any,
        tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    app, ids = seeded

    def shot(name: str) -> Path:
        path = tmp_path / f"dashboard-{name}.png"
        assert browser.save_screenshot(str(path)) and path.stat().st_size > 0
        return path

    # without the password: 401, on pages, JSON, /metrics and actions alike
    for path in ("/", "/api/queues", "/metrics", "/section/subscribers"):
        assert status_of(site + path) == 401
        assert status_of(site + path, auth="admin:wrong") == 401
    assert status_of(site + "/", auth=AUTH) == 200
    assert status_of(site + "/dead/requeue", data=f"task_id={ids['dead']}".encode()) == 401

    # the queue page shows the seeded app's counts
    browser.get(site + "/")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="emails"]')
    counts = {name: row.find_element(By.CSS_SELECTOR, f"td.{name}").text
              for name in ("ready", "scheduled", "running", "dead")}
    assert counts == {"ready": "4", "scheduled": "1", "running": "0", "dead": "0"}
    assert "p9=1" in row.text and "p2=3" in row.text
    default = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"]')
    assert default.find_element(By.CSS_SELECTOR, "td.dead").text == "1"
    assert browser.find_element(By.ID, "throughput-chart").tag_name == "svg"
    # the burst worker's six attempts, drawn as a line of the chart by the page itself
    (line,) = browser.find_elements(By.CSS_SELECTOR, "#throughput-chart polyline")
    assert line.find_element(By.TAG_NAME, "title").get_attribute("textContent") == "default"
    assert "default (6)" in browser.find_element(By.TAG_NAME, "main").text
    queues_png = shot("queues")
    if os.environ.get("MINITASK_DOCS_SCREENSHOT") == "1":
        shutil.copy(queues_png, ROOT / "docs" / "dashboard-queues.png")

    # a task argument holding a script tag is text, and runs nothing
    browser.get(f"{site}/task/{ids['dead']}")
    assert browser.find_element(By.ID, "args").text == f"['{SCRIPT}']"
    assert browser.find_element(By.ID, "status").text == "failed"
    assert "card declined" in browser.find_element(By.ID, "traceback").text
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text
    assert not browser.find_elements(By.CSS_SELECTOR, "main script")
    shot("task")

    expected = {"workers": ("#workers", "box-7"), "throughput": ("#throughput", "default"),
                "schedules": ("#schedules", f"nightly-{SCRIPT}"),
                "section/subscribers": ("#section", "web-1")}
    for page, (table, text) in expected.items():
        browser.get(f"{site}/{page}")
        assert text in browser.find_element(By.CSS_SELECTOR, table).text, page
        shot(page.replace("/", "-"))
    with pytest.raises(NoAlertPresentException):  # the schedule's name ran nothing
        browser.switch_to.alert.text

    # a POST without the CSRF token is refused, and changes nothing
    form = f"task_id={ids['dead']}".encode()
    assert status_of(site + "/dead/requeue", data=form, auth=AUTH) == 403
    assert app.handle(ids["dead"]).status() == "failed"

    # requeueing the dead letter from the page moves it back to its queue
    browser.get(site + "/dead")
    dead_row = browser.find_element(By.CSS_SELECTOR, f'tr[data-task-id="{ids["dead"]}"]')
    assert SCRIPT in dead_row.find_element(By.CSS_SELECTOR, "td.args").text
    shot("dead")
    dead_row.find_element(By.CSS_SELECTOR, "form.requeue button").click()
    # the action asks first, on a page of its own, and has done nothing yet
    question = wait_until(lambda: browser.find_elements(By.ID, "question"), timeout=60,
                          message="the confirmation's page")
    assert ids["dead"] in question[0].text
    assert app.handle(ids["dead"]).status() == "failed"
    browser.find_element(By.CSS_SELECTOR, "#confirm button").click()
    wait_until(lambda: browser.find_elements(By.ID, "notice"), timeout=60,
               message="the page after requeueing")
    assert "requeued" in browser.find_element(By.ID, "notice").text
    assert app.handle(ids["dead"]).status() == "queued"
    assert app.broker.queues.counts("default")["dead"] == 0
    assert app.dead_letters() == []
    shot("dead-after-requeue")
    assert len(list(tmp_path.glob("dashboard-*.png"))) == 8


@pytest.mark.parametrize("action", ["requeue", "purge"])
def test_a_dead_letter_whose_id_holds_control_characters_is_acted_on_from_its_row(
        seeded: Tuple[Minitask, Dict[str, str]], site: str, browser: Any,
        action: str) -> None:
    """Ids planted in Redis, holding ESC, BEL and a bidi override: the page shows them
    escaped, and its forms post the ids themselves through both steps (the row's
    button, then the confirmation's): purged, or refused a requeue by that very id."""
    from selenium.webdriver.common.by import By
    app, seeds = seeded
    keys = queue_keys(app.name, "default")
    dead = keys.dead
    planted = ["ok\x1b[31m-id\x07", "rtl\u202e-id"]
    client = app.broker.client
    client.zadd(dead, {task_id.encode(): 1_700_000_000_000 + n
                       for n, task_id in enumerate(planted)})
    # each with a message, as a real dead letter has. A message whose id holds a control
    # or format character cannot be decoded, so each carries an id of its own that holds
    # none; a requeue is then refused (the message names another task), and the refusal
    # names the letter's own id: the id came through both forms either way.
    model = decode_message(client.hget(keys.messages, seeds["dead"]) or b"")
    for n, task_id in enumerate(planted):
        client.hset(keys.messages, task_id.encode(),
                    encode_message(dataclasses.replace(model, id=f"planted-{n}")))
    for task_id in planted:
        browser.get(site + "/dead")
        shown = printable(task_id)
        assert shown in browser.find_element(By.ID, "dead").text
        browser.execute_script(
            "var rows = document.querySelectorAll('#dead tr');"
            "for (var i = 0; i < rows.length; i++) {"
            "  if (rows[i].getAttribute('data-task-id') === arguments[0]) {"
            "    rows[i].querySelector('form.' + arguments[1] + ' button').click(); }}",
            shown, action)
        question = wait_until(lambda: browser.find_elements(By.ID, "question"), timeout=60,
                              message="the confirmation's page")
        assert shown in question[0].text
        assert client.zscore(dead, task_id.encode()) is not None  # asked, not done
        browser.find_element(By.CSS_SELECTOR, "#confirm button").click()
        notice = wait_until(lambda: browser.find_elements(By.ID, "notice"), timeout=60,
                            message="the dead-letter page with the action's notice")
        if action == "requeue":
            assert notice[0].text.startswith(
                f"dead letter {shown} is not requeued: its message names another task id"
            ), notice[0].text
            assert client.zscore(dead, task_id.encode()) is not None
            assert client.hexists(keys.messages, task_id.encode())
        else:
            assert notice[0].text.startswith("purged 1"), notice[0].text
            assert client.zscore(dead, task_id.encode()) is None
            assert app.broker.results.state("default", task_id)[0] == "unknown"


def test_stopping_a_running_task_from_the_running_tab(
        ops_site: str, browser: Any, processes: Processes, redis_server: RedisServer,
        tmp_path: Path) -> None:
    """A real worker process (thread pool); Stop on the running tab's row asks to
    confirm on a page of its own, then the task ends cancelled; a POST without the
    page's CSRF token is refused and stops nothing."""
    from selenium.webdriver.common.by import By
    import tests.apps.ops as ops
    client = ops.app.broker.client
    docs = os.environ.get("MINITASK_DOCS_SCREENSHOT") == "1"
    processes.worker("tests.apps.ops", "--pool", "thread", "-c", "2", "--name", "w-stop",
                     env={"MINITASK_BROKER_URL": redis_server.url})
    handle = ops.long.delay("stop")
    wait_until(lambda: client.llen("marks:started:stop"), timeout=120,
               message="the long task's start")

    # no token: refused, at the question and at the confirmed step alike
    for form in (f"task_id={handle.id}&running=1",
                 f"task_id={handle.id}&running=1&confirm=yes"):
        assert status_of(ops_site + "/actions/cancel", data=form.encode(), auth=AUTH) == 403
    assert ops.app.handle(handle.id).status() == "running"

    # the worker's page says what it runs, as of its last heartbeat
    wait_until(lambda: handle.id in _beat(ops.app, "w-stop").get("running_ids", ""),
               timeout=60, message="the heartbeat listing the task")
    browser.get(ops_site + "/worker/w-stop")
    assert handle.id in browser.find_element(By.ID, "running-ids").text

    browser.get(ops_site + "/running")
    wait_until(lambda: browser.execute_script(
        "return !!document.querySelector("
        "'#listing tr[data-task-id=\"' + arguments[0] + '\"] form.cancel button');",
        handle.id), timeout=60, message="the running task's Stop button")
    # found and pressed in one call: the page redraws its rows every poll
    browser.execute_script(
        "document.querySelector('#listing tr[data-task-id=\"' + arguments[0] + "
        "'\"] form.cancel button').click();", handle.id)
    question = wait_until(lambda: browser.find_elements(By.ID, "question"), timeout=60,
                          message="the confirmation's page")
    assert handle.id in question[0].text and "cancelled, never retried" in question[0].text
    assert ops.app.handle(handle.id).status() == "running"  # asked, not done
    path = tmp_path / "dashboard-confirm.png"
    assert browser.save_screenshot(str(path))
    if docs:
        shutil.copy(path, ROOT / "docs" / "dashboard-confirm.png")
    browser.find_element(By.CSS_SELECTOR, "#confirm button").click()
    notice = wait_until(lambda: browser.find_elements(By.ID, "notice"), timeout=60,
                        message="the running tab with the action's notice")
    assert "/running?notice=" in browser.current_url
    assert handle.id in notice[0].text
    wait_until(lambda: ops.app.handle(handle.id).status() == "cancelled", timeout=60,
               message="the task ended cancelled")
    browser.get(ops_site + "/recent?state=cancelled")
    row = wait_until(lambda: browser.find_elements(
        By.CSS_SELECTOR, f'#listing tr[data-task-id="{handle.id}"]'), timeout=60,
        message="the cancelled task in the recent tab")
    assert "cancelled" in row[0].text and "w-stop" in row[0].text


def test_the_tabs_update_live_and_find_a_failed_task_by_name(
        ops_site: str, browser: Any, processes: Processes, redis_server: RedisServer,
        tmp_path: Path) -> None:
    """A real worker process; the running tab shows a task that starts after the page
    loaded, without a reload; the recent tab finds a failed task by a glob."""
    from selenium.webdriver.common.by import By
    import tests.apps.ops as ops
    client = ops.app.broker.client
    docs = os.environ.get("MINITASK_DOCS_SCREENSHOT") == "1"

    def shot(name: str) -> None:
        path = tmp_path / f"dashboard-{name}.png"
        assert browser.save_screenshot(str(path)) and path.stat().st_size > 0
        if docs:
            shutil.copy(path, ROOT / "docs" / f"dashboard-{name}.png")

    def row_of(task_id: str) -> Dict[str, Any]:
        return browser.execute_script("""
            var row = document.querySelector('#listing tr[data-task-id="' + arguments[0] + '"]');
            if (!row) { return null; }
            var time = row.querySelector("time");
            return {text: row.textContent, href: row.querySelector("a").href,
                    lease: time ? time.textContent : "", title: time ? time.title : "",
                    names: Array.from(document.querySelectorAll("#listing td.name"),
                                      function (td) { return td.textContent; })};
        """, task_id) or {}

    processes.worker("tests.apps.ops", "--pool", "thread", "-c", "2", "--name", "w-live",
                     env={"MINITASK_BROKER_URL": redis_server.url})
    wait_until(lambda: _live(ops.app), timeout=120,
               message="the worker's first heartbeat")
    ops.add.apply_in(600, 1, 2)  # something scheduled
    browser.get(ops_site + "/running")
    assert browser.find_element(By.CSS_SELECTOR, "#listing tr.none")
    browser.execute_script("window.notReloaded = true;")

    held = ops.hold.delay("live")
    wait_until(lambda: client.llen("marks:started:live"), timeout=120, interval=0.01,
               message="the held task's start")
    began = time.monotonic()
    # read in one script call: the page rewrites its rows every poll (no stale element)
    row = wait_until(lambda: row_of(held.id), timeout=60, interval=0.05,
                     message="the running task's row, without a reload")
    shown_after = time.monotonic() - began
    assert browser.execute_script("return window.notReloaded === true;")  # the same page
    assert "ops.hold" in row["text"] and "'live'" in row["text"]
    # the row links to the task's page; its times read "in 25 s", exact on hover
    assert row["href"].endswith(f"/task/{held.id}")
    assert row["lease"].startswith("in ") and row["title"].startswith("20")
    print(f"running tab: row shown {shown_after:.2f} s after the task started")

    # a progress bar advances, without a reload
    stepped = ops.steps.delay("steps", 4)
    wait_until(lambda: client.llen("marks:started:steps"), timeout=120,
               message="the stepped task's start")

    def bar(task_id: str) -> Any:
        return browser.execute_script("""
            var bar = document.querySelector(
                '#listing tr[data-task-id="' + arguments[0] + '"] progress');
            return bar ? [bar.value, bar.max] : null;""", task_id)

    wait_until(lambda: bar(stepped.id) == [1, 4], timeout=60, message="the bar at 1 of 4")
    client.rpush("marks:step", "go")
    wait_until(lambda: bar(stepped.id) == [2, 4], timeout=60, message="the bar at 2 of 4")
    assert browser.execute_script("return window.notReloaded === true;")
    shot("running")
    client.rpush("marks:step", "go", "go")
    browser.get(ops_site + "/scheduled")
    assert "ops.add" in browser.find_element(By.ID, "listing").text
    shot("scheduled")

    client.rpush("marks:release", "go")
    failed = ops.login.delay("ann", "hunter2")
    ops.add.delay(2, 3)
    wait_until(lambda: ops.app.handle(failed.id).status() == "failed", timeout=120,
               message="the login task's failure")
    browser.get(ops_site + "/recent")
    browser.find_element(By.NAME, "task").send_keys("ops.log*")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    wait_until(lambda: "task=ops.log" in browser.current_url, timeout=60,
               message="the search's page")
    found = wait_until(lambda: row_of(failed.id), timeout=60,
                       message="the failed task found by its name")
    assert "PermissionError" in found["text"]
    assert found["names"] and set(found["names"]) == {"ops.login"}
    assert "hunter2" not in browser.page_source
    shot("recent")

    browser.get(ops_site + "/worker/w-live")
    assert browser.find_element(By.ID, "name").text == "w-live"
    wait_until(lambda: int(_beat(ops.app, "w-live").get("processed", 0)) >= 2, timeout=120,
               message="the worker's counts in its heartbeat")
    browser.get(ops_site + "/worker/w-live")
    assert int(browser.find_element(By.ID, "processed").text) >= 2
    assert failed.id in browser.find_element(By.ID, "worker-recent").text
    shot("worker")


def _live(app: Minitask) -> bool:
    from minitask.admin import live_workers
    return bool(live_workers(app))


def _beat(app: Minitask, name: str) -> Dict[str, Any]:
    from minitask.admin import live_workers
    for info in live_workers(app):
        if info["name"] == name:
            return info
    return {}
