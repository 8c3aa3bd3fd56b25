"""Many armed schedule records minitask did not write, and one huge one, in a served
queue (probe 21a, issue 29 H1), on a real redis-server and a real worker process.

Each planted record had a tick too, so the worker's read of its schedules (every 5 s
while busy) fetched every one of them: 100,000 cost 4.3 MB and 0.7 s of CPU a read,
1,000,000 kept the worker at 100 % CPU with tasks of other queues waiting 12 to 20 s,
and one armed record of 50 MB was read whole at each. Now a read takes a bounded batch
of ticks (the earliest first, a scan on from the last read, and the schedules the
worker knows by name) and never reads a record longer than any minitask writes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest
import redis

from minitask.broker.keys import QueueKeys
from tests.support.planted_schedules import planted_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T = QueueKeys("planted", "timed")
PLANTED = 100_000
HUGE = 5 * 1024 * 1024
#: how long the worker is watched once the data is planted: three reads of its schedules
WATCHED_S = 16.0


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    yield start_redis()


def _plant(client: "redis.Redis[bytes]") -> None:
    """Armed junk, due long ago (ahead of the worker's own schedule in the ticks),
    and one armed record of 5 MB due before all of them."""
    for start in range(0, PLANTED, 20_000):
        names = range(start, start + 20_000)
        pipe = client.pipeline(transaction=False)
        pipe.hset(T.schedules, mapping={f"armed{i}": b"\xc1junk" for i in names})
        pipe.zadd(T.ticks, {f"armed{i}": 1_000_000_000_000 for i in names})
        pipe.execute()
    client.hset(T.schedules, "huge", b"x" * HUGE)
    client.zadd(T.ticks, {"huge": 999_000_000_000})


def test_planted_armed_records_cost_a_read_of_the_schedules_a_bounded_batch(
        server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    with planted_worker(server, processes, tmp_path, request) as served:
        client = served.client
        _plant(client)
        runs_before = client.llen("marks:timed")
        sent, waits = served.watch(WATCHED_S, 20.0)  # busy: it reads every 5 s
        # three reads or more: about 100 kB each now (two batches of junk), 7 MB
        # each before (every armed record, the huge one whole)
        assert sent < 2_000_000, sent
        assert max(waits) < 3.0, waits
        text = served.log.read_text(errors="replace")
        assert "cannot be read by this worker" in text, text[-3000:]
        # the worker's own schedule (behind 100,001 earlier ticks) runs on, once a tick
        runs = served.runs_after(runs_before)
        assert len(runs) == len(set(runs)), runs
