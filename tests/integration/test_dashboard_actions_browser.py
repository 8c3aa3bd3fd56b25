"""The queue-wide actions in headless Chromium (as test_dashboard_browser.py drives
it): the queue page's "Delete ready tasks" and the dead page's "Purge all" each ask
on a confirmation page of their own, change nothing until confirmed, then do what
they said and nothing more; a POST without the CSRF token changes nothing."""
from __future__ import annotations

from typing import Any

import pytest

from minitask import Minitask
# the browser fixture (headless Chromium, skipped when it is not installed), and an
# empty app served in this process
from tests.integration.test_dashboard_browser import AUTH, browser, status_of  # noqa: F401
from tests.integration.test_dashboard_workflow_browser import shop, site  # noqa: F401
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def test_deleting_ready_tasks_and_purging_dead_letters_through_the_confirmation(
        shop: Minitask, site: str, browser: Any) -> None:  # noqa: F811 (imported fixtures)
    from selenium.webdriver.common.by import By

    @shop.task(name="shop.charge", retries=0)
    def charge(note: str) -> None:
        raise ValueError(f"card declined for {note}")

    @shop.task(name="shop.resize")
    def resize(index: int) -> int:
        return index

    charge.delay_many([(f"order-{index}",) for index in range(3)])
    shop.worker(["default"], burst=True).run()  # three dead letters
    resize.delay_many([(index,) for index in range(7)])
    later = resize.apply_async((99,), delay=3600)
    counts = shop.broker.queues.counts
    assert (counts("default")["ready"], counts("default")["dead"]) == (7, 3)

    def confirm(expected: str) -> str:
        """On the confirmation page: check its question, that nothing changed yet,
        confirm, and return the notice of the page it leads back to."""
        question = wait_until(lambda: browser.find_elements(By.ID, "question"),
                              timeout=60, message="the confirmation's page")
        assert expected in question[0].text
        assert (counts("default")["ready"], counts("default")["dead"]) == before
        browser.find_element(By.CSS_SELECTOR, "#confirm button").click()
        notice = wait_until(lambda: browser.find_elements(By.ID, "notice"), timeout=60,
                            message="the page after the action")
        return str(notice[0].text)

    # without the CSRF token: refused, and nothing deleted
    assert status_of(site + "/actions/purge", data=b"queue=default&confirm=yes",
                     auth=AUTH) == 403
    assert status_of(site + "/actions/purge-dead", data=b"queue=default&confirm=yes",
                     auth=AUTH) == 403

    browser.get(site + "/")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"]')
    before = (7, 3)
    row.find_element(By.CSS_SELECTOR, "form.purge button").click()
    assert "deleted 7 ready task(s) from queue 'default'" in confirm("default")
    assert counts("default")["ready"] == 0
    # scheduled and dead tasks stay
    assert counts("default")["scheduled"] == 1 and later.status() == "scheduled"
    assert counts("default")["dead"] == 3
    # the queue page no longer offers it
    assert not browser.find_elements(By.CSS_SELECTOR, 'tr[data-queue="default"] form.purge')

    browser.get(site + "/dead")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr[data-task-id]")) == 3
    button = browser.find_element(By.CSS_SELECTOR, "form.purge-queue button")
    assert button.text == "Purge all 3 of default"
    before = (0, 3)
    button.click()
    assert "purged 3 dead letter(s)" in confirm("default")
    assert counts("default")["dead"] == 0 and shop.dead_letters() == []
    assert later.status() == "scheduled"
    browser.get(site + "/dead")
    assert not browser.find_elements(By.CSS_SELECTOR, "tr[data-task-id]")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.purge-queue")
