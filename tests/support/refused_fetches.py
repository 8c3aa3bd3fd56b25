"""What the tests of a fetch refused part way share (issue 29, review29o): fetches called
as a worker calls them (``QueueStore.fetch``) with their own clock (``NOW``), each
saying the ids it delivered (``fetched``), on the test's own redis-server with an ACL
user whose rules change between fetches."""
from __future__ import annotations

from typing import List

from minitask import Minitask

#: ms: the fetches' own clock (far from the server's: kept).
NOW = 1_900_000_000_000


def fetched(app: Minitask, now_ms: int, lease_ms: int = 600_000, count: int = 5,
            max_deliveries: int = 5) -> List[str]:
    """The ids a fetch of up to ``count`` tasks of queue ``default`` at ``now_ms`` leased
    (for ``lease_ms``; a task delivered ``max_deliveries`` times at most)."""
    result = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=lease_ms, count=count,
                                     max_deliveries=max_deliveries)
    return [delivery.task_id for delivery in result.deliveries]
