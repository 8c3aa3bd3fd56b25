"""An app whose workflows meet a queue's ``flow`` key of another type (issue 29,
review29k L1): steps of a grouped task (joined by spawn_flow.lua), of a grouped one
with a group limit, and of a rate-limited one (its spec written beside its message); a plain task
of another queue (a workflow spanning two queues is checked first: spawn_check.lua).
The broker comes from MINITASK_BROKER_URL; ``producer(broker)`` builds the same app on
a test's side, for sending.
"""
from __future__ import annotations

from typing import Any

from minitask import Minitask


def grouped(tenant: str, n: int) -> int:
    return n


def group_limited(tenant: str, n: int) -> int:
    return n


def rated(n: int) -> int:
    return n


def elsewhere(n: int) -> int:
    return n


def _register(app: Minitask) -> Minitask:
    app.task(name="sa.grouped", queue="sa", group_by="tenant")(grouped)
    app.task(name="sa.group_limited", queue="sa", group_by="tenant",
             group_max_running=1)(group_limited)
    app.task(name="sa.rated", queue="sa", rate_limit="100/s")(rated)
    app.task(name="sa.elsewhere", queue="sb")(elsewhere)
    return app


def producer(broker: Any) -> Minitask:
    return _register(Minitask("sa", broker=broker))


app = _register(Minitask("sa"))
