"""Tasks this plugin adds to the ``shop`` app.

The shop's app module is imported as ``examples.orders.tasks``, so run the
worker (and producers) from the repository root, or put it on ``PYTHONPATH``::

    pip install -e examples/plugin
    minitask worker -A examples.orders.tasks
"""
from __future__ import annotations

from examples.orders.tasks import app


@app.task(queue="emails", priority=3, name="reviews.ask_for_review")
def ask_for_review(order_id: int, buyer: str) -> str:
    """Ask a buyer to review their order; enqueue it with ``apply_in`` days after the sale."""
    return f"asked {buyer} to review order {order_id}"
