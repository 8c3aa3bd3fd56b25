"""A worker says its lease length again every SAY_AGAIN heartbeats, on a real
redis-server: the queue's ``lease_longest`` deleted (a clean-up, an eviction) heals
while the worker runs, rather than leaving a longer worker's leases to be taken for
foreign until it restarts (issue 29, review of the far-ahead lease check)."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.worker.leases import SAY_AGAIN

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]


def test_a_deleted_lease_longest_is_said_again_by_the_heartbeat(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    worker = app.worker(burst=True)
    assert not worker.run_once()  # says it before the first fetch
    longest = queue_keys(app.name, "default").lease_longest
    assert admin.zscore(longest, "ms") == app.visibility_timeout * 1000
    admin.delete(longest)
    for _ in range(SAY_AGAIN - 1):
        worker.beat()
    assert admin.exists(longest) == 0  # (not at every beat: one command in SAY_AGAIN)
    worker.beat()
    assert admin.zscore(longest, "ms") == app.visibility_timeout * 1000
