"""Many schedule records and ticks minitask did not write in a served queue (probe 19a,
MEDIUM 6), on a real redis-server and a real worker process.

100,000 planted records gave 100,000 WARNING lines (one a name), grew the worker by
100 MB (an entry and a remembered record each), cost it about a second of CPU at
every read of the schedules (every 5 s while busy), so a task of another queue waited
1.7 s and more; 300,000 planted ticks were read whole (10 MB) at each. Now the worker
reads only a bounded batch of armed schedules (a record and a tick each:
schedule_armed.lua), says the unreadable ones in one line a queue, and keeps nothing
for them; the ticks of its own schedule still run once each.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest
import redis

from minitask.broker.keys import QueueKeys
from tests.support.planted_schedules import planted_worker
from tests.support.processes import Processes
from tests.support.procfs import rss_kb
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T = QueueKeys("planted", "timed")
PLANTED = 100_000
ARMED_JUNK = 1_000
#: how long the worker is watched once the data is planted: three reads of its schedules
WATCHED_S = 16.0


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    yield start_redis()


def _plant(client: "redis.Redis[bytes]") -> None:
    for start in range(0, PLANTED, 20_000):
        pipe = client.pipeline(transaction=False)
        names = range(start, start + 20_000)
        pipe.hset(T.schedules, mapping={f"junk{i}": b"\xc1junk" for i in names})
        pipe.zadd(T.ticks, {f"tick{i}": 1e13 for i in names})
        pipe.execute()
    # armed ones too: a record and a tick each (due long ago), none readable
    client.hset(T.schedules, mapping={f"armed{i}": b"\xc1junk" for i in range(ARMED_JUNK)})
    client.zadd(T.ticks, {f"armed{i}": 1_000_000_000_000 for i in range(ARMED_JUNK)})


def test_planted_schedules_cost_a_worker_one_line_and_no_read_of_their_own(
        server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    with planted_worker(server, processes, tmp_path, request) as served:
        client, worker, log = served.client, served.worker, served.log
        lines_before = len(log.read_text(errors="replace").splitlines())
        rss_before = rss_kb(worker.pid)
        _plant(client)
        runs_before = client.llen("marks:timed")
        sent, waits = served.watch(WATCHED_S, 10.0)
        rss_after = rss_kb(worker.pid)
        text = log.read_text(errors="replace")
        said = [line for line in text.splitlines()[lines_before:] if "junk" in line
                or "armed" in line or "cannot be read" in line]
        # one line for the armed ones (a count and a few names), none for each record
        assert 1 <= len(said) <= 3, said[:10]
        assert any("1,000 armed schedule record(s) of queue 'timed'" in line for line in said), said
        # no task of another queue waits for a read of the schedules (they waited 1.7 s
        # and more before; about 0.02 s now: 1.5 s leaves room for a loaded machine)
        assert max(waits) < 1.5, waits
        # nothing is kept for them, and they are not read again and again (300 kB a
        # read for the armed junk's records and names: 100,000 planted records or
        # ticks are 2 to 3 MB each)
        assert rss_after - rss_before < 20_000, (rss_before, rss_after)
        assert sent < 2_000_000, sent
        # the worker's own schedule still runs, once a tick
        runs = served.runs_after(runs_before)
        assert len(runs) == len(set(runs)), runs
        assert worker.poll() is None
