"""An app whose grouped sends meet queue-wide fair-queue keys of another type (issue 29,
probe29n L5): a plain grouped task (its spec PLAIN: joined inline by the send), a
grouped one with a group limit (joined by flow.lua's library), and a plain task. The
broker comes from MINITASK_BROKER_URL; ``producer(broker)`` builds the same app on a
test's side, for sending.
"""
from __future__ import annotations

from typing import Any

from minitask import Minitask


def plain(tenant: str, n: int) -> int:
    return n


def limited(tenant: str, n: int) -> int:
    return n


def ungrouped(n: int) -> int:
    return n


def _register(app: Minitask) -> Minitask:
    app.task(name="fa.plain", queue="fa", group_by="tenant")(plain)
    app.task(name="fa.limited", queue="fa", group_by="tenant", group_max_running=1)(limited)
    app.task(name="fa.ungrouped", queue="fa")(ungrouped)
    return app


def producer(broker: Any) -> Minitask:
    return _register(Minitask("fa", broker=broker))


app = _register(Minitask("fa"))
