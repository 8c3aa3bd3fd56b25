"""The emails of a small shop, as minitask tasks of the app ``shop``.

Password-reset emails (priority 9) go out before newsletters (priority 1) in
the ``emails`` queue; an item is put on sale later with ``apply_in``. No real
email is sent: ``_deliver`` logs each one and, when ``SHOP_OUTBOX`` names a
file, appends it there so you can see the order in which they went out.

From the repository root, in one terminal::

    minitask worker -A examples.orders.tasks

and in another::

    python -m examples.orders.producer
"""
from __future__ import annotations

import logging
import os
import time

from minitask import Minitask, current_task

logger = logging.getLogger(__name__)

#: Environment variable naming a file every "sent" email is appended to.
OUTBOX_ENV = "SHOP_OUTBOX"

app = Minitask("shop")


def _deliver(to: str, subject: str) -> str:
    """Stand-in for an email client: log the email, and append it to the outbox file."""
    logger.info("email to %s: %s", to, subject)
    outbox = os.environ.get(OUTBOX_ENV)
    if outbox:
        with open(outbox, "a", encoding="utf-8") as file:
            file.write(f"{to}: {subject}\n")
    return f"emailed {to}: {subject}"


def _address(user_id: int) -> str:
    return f"user{user_id}@example.com"


@app.task(queue="emails", priority=9, name="emails.password_reset")
def send_password_reset(user_id: int) -> str:
    """A user is waiting for this one: it outranks everything else in ``emails``."""
    return _deliver(_address(user_id), "Reset your password")


@app.task(queue="emails", priority=1, timeout=30, name="emails.newsletter")
def send_newsletter(user_id: int, issue: str) -> str:
    """Nobody waits for a newsletter: it goes out when nothing more urgent is queued."""
    time.sleep(0.05)  # rendering the newsletter
    return _deliver(_address(user_id), f"Newsletter: {issue}")


@app.task(queue="emails", name="emails.item_sold")
def send_item_sold(order_id: int, item: str, seller: str) -> str:
    """Tell the seller their item was sold (priority 5, the default)."""
    return _deliver(seller, f"Your {item} was sold (order {order_id})")


@app.task(queue="emails", retries=3, retry_backoff=0.2, retry_on=(ConnectionError,),
          name="emails.receipt")
def send_receipt(order_id: int, buyer: str) -> str:
    """Retried when the mail server is unavailable; here it is busy on every first attempt."""
    context = current_task()
    attempt = context.attempt if context is not None else 1
    if attempt == 1:
        raise ConnectionError("mail server busy, try again later")
    return _deliver(buyer, f"Receipt for order {order_id}") + f" (attempt {attempt})"


@app.task(queue="emails", name="emails.invoice")
def send_invoice(order_id: int, address: str) -> str:
    """A bad address is not worth retrying: the task goes to the dead letters at once."""
    if "@" not in address:
        raise ValueError(f"cannot send the invoice of order {order_id} to {address!r}")
    return _deliver(address, f"Invoice for order {order_id}")


@app.task(name="catalog.put_on_sale")
def put_on_sale(item: str, percent_off: int) -> str:
    """Lower an item's price; enqueued with ``apply_in`` or ``apply_at`` to start a sale later."""
    logger.info("%s is now %d%% off", item, percent_off)
    return f"{item} is now {percent_off}% off"
