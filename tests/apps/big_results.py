"""An app that lets results be far larger than its test's Redis reads in one value
(``max_result_bytes`` 200 MB against a server started with ``proto-max-bulk-len``
1mb); the broker comes from MINITASK_BROKER_URL; ``producer(broker)`` builds the
same app on a test's side, for sending."""
from __future__ import annotations

from typing import Any

from minitask import Minitask


def sized(n: int) -> str:
    return "x" * n


def producer(broker: Any = None) -> Minitask:
    app = Minitask("bigres", broker=broker, max_result_bytes=200_000_000)
    app.task(name="bigres.sized", retries=0)(sized)
    return app


app = producer()
