"""A worker that loses Redis while listening for ``minitask shutdown`` orders says so
in words that do not read as a shutdown requested (trial34: "lost Redis while trying to
listen for orders (minitask shutdown)")."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

from minitask.errors import BrokerError
from minitask.worker.control import Orders
from tests.support.waiting import wait_until


class Gone:
    """A registry whose Redis is gone."""

    def next_orders(self, *_: Any) -> List[str]:
        raise BrokerError("could not read orders: Connection refused", reason="unreachable")

    def send_order(self, *_: Any) -> None:
        raise BrokerError("could not send an order: Connection refused", reason="unreachable")


def test_the_orders_listener_says_it_lost_redis_listening_for_shutdown_orders(
        caplog: pytest.LogCaptureFixture) -> None:
    stopped: List[str] = []
    orders = Orders(Gone(), "w1", stopped.append)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="minitask.worker.outages"):
        orders.start()
        try:
            wait_until(lambda: any("lost Redis" in r.getMessage() for r in caplog.records),
                       timeout=10)
        finally:
            orders.end()
            assert orders._thread is not None
            orders._thread.join(timeout=10)
    said = [r.getMessage() for r in caplog.records if "lost Redis" in r.getMessage()]
    assert "while trying to listen for minitask shutdown orders: could not read orders" \
        in said[0], said
    assert "(minitask shutdown)" not in said[0] and not stopped
