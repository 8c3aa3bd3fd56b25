"""Tests of the shop's emails, written the way a project tests its own tasks.

The project's pytest.ini names the app, and minitask's pytest plugin isolates it in
every test (a private in-memory broker with a clock that only ``drain`` moves)::

    [pytest]
    minitask_app = examples.orders.tasks:app

Nothing here needs Redis or a worker: ``drain`` runs the tasks in the test.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from minitask import Minitask, TaskFailed
from minitask.testing import drain

from examples.orders.tasks import (OUTBOX_ENV, put_on_sale, send_invoice, send_newsletter,
                                   send_password_reset, send_receipt)


@pytest.fixture
def outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "outbox.txt"
    monkeypatch.setenv(OUTBOX_ENV, str(path))
    return path


def sent(outbox: Path) -> list:
    return outbox.read_text().splitlines() if outbox.exists() else []


def test_a_password_reset_goes_out_before_newsletters_queued_earlier(
        minitask_app: Minitask, outbox: Path) -> None:
    send_newsletter.delay_many([(user_id, "March deals") for user_id in (1, 2)])
    reset = send_password_reset.delay(42)

    assert drain(minitask_app) == 3

    assert reset.get(timeout=1) == "emailed user42@example.com: Reset your password"
    assert sent(outbox) == ["user42@example.com: Reset your password",
                            "user1@example.com: Newsletter: March deals",
                            "user2@example.com: Newsletter: March deals"]


def test_a_receipt_is_retried_when_the_mail_server_is_busy(
        minitask_app: Minitask, outbox: Path) -> None:
    receipt = send_receipt.delay(1001, "ann@example.com")

    assert drain(minitask_app) == 1  # the first attempt fails
    assert receipt.status() == "retrying"
    assert sent(outbox) == []

    assert drain(minitask_app, advance=1) == 1  # its backoff is at most 0.2 s
    assert receipt.get(timeout=1).endswith("(attempt 2)")
    assert sent(outbox) == ["ann@example.com: Receipt for order 1001"]


def test_an_invoice_to_a_bad_address_ends_in_the_dead_letters(minitask_app: Minitask) -> None:
    invoice = send_invoice.delay(1001, "not-an-address")

    drain(minitask_app, advance=60)  # not retried, however long we wait

    with pytest.raises(TaskFailed) as failed:
        invoice.get(timeout=1)
    assert failed.value.exc_type == "ValueError"
    (dead,) = minitask_app.dead_letters()
    assert (dead.task_id, dead.reason) == (invoice.id, "failed")


def test_a_sale_starts_when_its_time_comes(minitask_app: Minitask) -> None:
    sale = put_on_sale.apply_in(3600, "brass lamp", 20)

    assert drain(minitask_app, advance=3599) == 0
    assert sale.status() == "scheduled"
    assert drain(minitask_app, advance=1) == 1
    assert sale.get(timeout=1) == "brass lamp is now 20% off"


def test_every_test_starts_with_an_empty_broker(minitask_app: Minitask) -> None:
    assert drain(minitask_app, advance=86_400) == 0
    assert minitask_app.dead_letters() == []
