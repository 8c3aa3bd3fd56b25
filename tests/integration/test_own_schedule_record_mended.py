"""A worker writes again the unreadable record of its app's own schedule (issue 29,
probe 29g's low).

A record of 50 MB planted over the app's own decorated schedule (or one damaged) was
not read by the worker (too large to be one minitask writes): said once, and the
schedule never fired again until a worker started and wrote its record anew. The
app's code is the truth for its own schedules: the worker that finds such a record
unreadable writes it again at once (said once), and the schedule fires at its next
tick with no restart. A real redis-server and a real worker process.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from minitask.broker.keys import QueueKeys
from tests.support.planted_schedules import DEADLINE, planted_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

T = QueueKeys("planted", "timed")
HUGE = 50 << 20


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    yield start_redis()


@pytest.mark.parametrize("planted", [b"x" * HUGE, b"\xc1 no record"], ids=["huge", "damaged"])
def test_the_apps_own_schedule_fires_again_once_its_record_is_overwritten(
        server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest, planted: bytes) -> None:
    with planted_worker(server, processes, tmp_path, request) as served:
        client = served.client
        client.hset(T.schedules, "often", planted)
        client.rpush(T.wake, "1")  # (an idle worker reads its schedules at once)
        wait_until(lambda: client.hstrlen(T.schedules, "often") != len(planted),
                   timeout=DEADLINE, message="the record to be written again")
        runs = served.runs_after(client.llen("marks:timed"), more=3)
        assert len(runs) == len(set(runs)), runs  # a tick runs once
        text = served.log.read_text(errors="replace")
        said = [line for line in text.splitlines() if "written again from the app's code" in line]
        assert len(said) == 1, text[-3000:]
        assert "xxxxxxxxxx" not in text
