"""A decorated schedule whose tick Redis loses (its queue's ``ticks`` key deleted or
evicted) while its record stays, under a running worker, fires again: the worker's
write-back found the record there and did nothing, and the schedule stopped until a
worker started (review of sched30). Real worker process, test-owned redis-server."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from minitask.broker.keys import queue_keys
from tests.support.lost_schedules import lose_and_resume
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash


def _delete_ticks(server: RedisServer) -> None:
    client = server.client()
    try:
        keys = queue_keys("periodic", "default")
        client.delete(keys.ticks)
        assert client.hexists(keys.schedules, "tick")  # the record stays
    finally:
        client.close()


def test_ticks_key_deleted(start_redis: Callable[..., RedisServer], processes: Processes,
                           tmp_path: Path) -> None:
    lose_and_resume(start_redis, processes, tmp_path / "worker.log", _delete_ticks)
