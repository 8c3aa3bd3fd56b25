"""The workflow page in headless Chromium (as test_dashboard_browser.py drives it): a
chord, reached from a member's task page, draws every member and the body with their
states, and its error callback as a dashed "on error" box, and follows them live while
a worker runs it (in this process: the page polls the server's thread). Its
screenshot goes to the test's tmp dir, and with MINITASK_DOCS_SCREENSHOT=1 to
docs/dashboard-workflow.png."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator, List
from urllib.parse import quote

import pytest
import redis

from minitask import Minitask, chord
from tests.support.dashboards import serving
# the browser fixture: headless Chromium, skipped when it is not installed
from tests.integration.test_dashboard_browser import AUTH, SCRIPT, browser  # noqa: F401
from tests.support.paths import ROOT
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    app = Minitask("shop", broker=redis_server.url)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def site(shop: Minitask) -> Iterator[str]:
    with serving(shop, auth=AUTH) as server:
        yield f"http://127.0.0.1:{server.server_port}"


def test_a_chord_s_page_draws_every_member_and_the_body_with_their_states(
        shop: Minitask, site: str, browser: Any,  # noqa: F811 (the fixture imported above)
        tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    @shop.task(name="shop.resize")
    def resize(image: str) -> int:
        return len(image)

    @shop.task(name="shop.charge", retries=0)
    def charge(image: str) -> int:
        raise ValueError(f"card declined for {image}")

    @shop.task(name="shop.publish")
    def publish(sizes: List[int]) -> int:
        return sum(sizes)

    @shop.task(name="shop.alert")
    def alert(failed_id: str) -> str:
        return f"paged about {failed_id}"

    # a member whose id is a script tag: drawn and linked as text
    members = [resize.s(f"img-{index}.png") for index in range(3)]
    members.append(resize.s("hostile.png").set(task_id=SCRIPT))
    members.append(charge.s("big.png"))
    handle = chord(members, publish.s()).on_error(alert.s()).delay()
    ids = [member.options.get("task_id") for member in members]

    def boxes() -> List[List[str]]:
        return list(browser.execute_script("""
            return Array.from(document.querySelectorAll("#workflow-graph a.step"),
                function (a) { return [a.getAttribute("data-id"), a.getAttribute("data-state"),
                                       a.querySelector("text").textContent,
                                       a.getAttribute("href"),
                                       a.querySelector("rect").getAttribute("fill")]; });"""))

    # from a member's task page to its workflow's, before any step ran
    browser.get(f"{site}/task/{quote(SCRIPT, safe='')}")
    assert browser.find_element(By.ID, "status").text == "queued"
    link = browser.find_element(By.ID, "workflow")
    assert link.text == handle.id
    link.click()
    wait_until(lambda: browser.find_elements(By.ID, "workflow-graph"), timeout=60,
               message="the workflow page")
    assert sorted(state for _, state, _, _, _ in boxes()) == ["pending"] + ["queued"] * 5

    def errback() -> List[str]:
        return list(browser.execute_script("""
            var a = document.querySelector("#workflow-graph a.errback");
            return [a.getAttribute("data-state"), a.querySelector("text").textContent,
                    a.querySelector("rect").getAttribute("stroke-dasharray"),
                    a.getAttribute("href")];"""))
    first = errback()
    assert first[:3] == ["pending", "on error", "6 3"] and first[3].startswith("/task/")
    browser.execute_script("window.notReloaded = true;")

    # a real worker runs the chord: the page follows without a reload, then stops polling
    shop.worker(burst=True).run()
    wait_until(lambda: "every step has ended" in browser.find_element(By.ID, "live").text,
               timeout=60, interval=0.1, message="the page's live update")
    assert browser.execute_script("return window.notReloaded === true;")
    # the error callback ran when charge ended dead: followed live too
    assert errback() == ["succeeded"] + first[1:]
    drawn = boxes()
    fills = {state: fill for _, state, _, _, fill in drawn}
    assert fills["succeeded"] != fills["dead"] != fills["cancelled"]
    assert "1 cancelled, 1 dead, 4 succeeded" == browser.find_element(By.ID, "counts").text
    by_id = {step_id: (state, name, href) for step_id, state, name, href, _ in drawn}
    assert len(drawn) == 6  # five members and the body
    assert by_id[SCRIPT] == ("succeeded", "shop.resize", f"/task/{quote(SCRIPT, safe='')}")
    assert by_id[handle.id] == ("cancelled", "shop.publish", f"/task/{handle.id}")
    states = sorted(state for state, _, _ in by_id.values())
    assert states == ["cancelled", "dead", "succeeded", "succeeded", "succeeded", "succeeded"]
    assert ids[-2] == SCRIPT
    summary = browser.find_element(By.ID, "summary").text
    assert "A chord of 6 task(s)" in summary and "1 dead" in summary
    with pytest.raises(NoAlertPresentException):  # the id ran nothing
        browser.switch_to.alert.text
    assert not browser.find_elements(By.CSS_SELECTOR, "main script")  # live.js is after main
    # a box is a link to its step's page
    browser.find_element(By.CSS_SELECTOR, f'#workflow-graph a[data-id="{handle.id}"]').click()
    wait_until(lambda: browser.find_elements(By.ID, "status"), timeout=60,
               message="the body's task page")
    assert browser.find_element(By.ID, "status").text == "cancelled"
    assert browser.find_element(By.ID, "workflow").text == handle.id  # and back

    browser.get(f"{site}/workflow/{handle.id}")
    assert sorted(boxes()) == sorted(drawn)  # as the server draws them, colours and all
    assert errback()[0] == "succeeded"
    path = tmp_path / "dashboard-workflow.png"
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 0
    if os.environ.get("MINITASK_DOCS_SCREENSHOT") == "1":
        shutil.copy(path, ROOT / "docs" / "dashboard-workflow.png")
    browser.get(f"{site}/workflow/nope")
    assert "No queue of this app holds workflow nope" in browser.find_element(
        By.ID, "unknown").text
