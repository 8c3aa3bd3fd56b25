"""Fair-queue test helpers: an app with one grouped task, the order fetches serve, and
the keys of a queue's groups."""
from __future__ import annotations

from typing import Any, Callable, List

import redis

from minitask import Minitask
from minitask.stores.queue import FetchResult
from tests.support.clock import ManualClock


def fetch(app: Minitask, clock: ManualClock, count: int = 1,
          lease_ms: int = 30_000) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=lease_ms,
                                   count=count, max_deliveries=5)


def served(app: Minitask, clock: ManualClock, fetches: int, count: int = 1) -> List[str]:
    """``<group><n>`` of each task handed out by ``fetches`` fetches (never acked)."""
    order = []
    for _ in range(fetches):
        for delivery in fetch(app, clock, count).deliveries:
            args = delivery.message().args
            order.append(f"{args[0]}{args[1]}")
    return order


def tenant_app(make_app: Callable[..., Minitask], **options: Any) -> Any:
    """An app and its task ``job(tenant, n)``, grouped by tenant."""
    app = make_app()

    @app.task(group_by="tenant", name="job", **options)
    def job(tenant: str, n: int) -> int:
        return n

    return app, job


def group_keys(client: "redis.Redis[bytes]", pattern: str = "*") -> List[str]:
    """The keys of the queue's groups and their bookkeeping that exist (among the keys
    ``pattern`` matches)."""
    return sorted(key.decode() for key in client.keys(pattern)
                  if b":g:" in key or b"groups" in key or key.endswith(b":cancelled"))
