"""A schedule whose queue's ``ticks`` key is deleted (or evicted) under running workers
runs again within about a tick, never a tick twice. The fire that met the missing tick
answered 'moved' (as if another worker had fired it) and left the schedule unarmed in
the worker's copy until its next read of the schedules, up to ``REFRESH_MS`` (5 s)
later: an every=1 s schedule missed some five runs (probe32 L1). It answers 'changed'
now: the worker reads at once, and that read writes the tick back (lost_schedules.py),
armed at its next tick. Two real worker processes race for the ticks; test-owned
redis-server."""
from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Callable, List

import pytest

from minitask.broker.keys import queue_keys
from tests.support.crash_kit import DEADLINE
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.crash, pytest.mark.timeout(180)]

SCHEDULE = [{"name": "tick1", "task": "beat", "every": 1.0}]
#: Deletions, each a while after a run (reads of the schedules every 5 s come at other
#: times of the tick each round).
ROUNDS = 4
#: The next run after a deletion comes within this long: two ticks at most (the tick
#: met missing, then the one armed again), with room for a loaded 2-core machine. It
#: took up to 6 s (the worker's next read of the schedules).
RESUMED_S = 3.5


def runs(server: RedisServer) -> List[List[str]]:
    client = server.client()
    try:
        return [raw.decode().split("|") for raw in client.lrange("marks:run:tick1", 0, -1)]
    finally:
        client.close()


def test_deleted_ticks_fire_again_within_two_ticks_once_each(
        start_redis: Callable[..., RedisServer], processes: Processes,
        tmp_path: Path) -> None:
    server = start_redis()
    env = {"MINITASK_BROKER_URL": server.url, "TEST_PERIODIC": json.dumps(SCHEDULE)}
    logs = [tmp_path / f"worker{index}.log" for index in range(2)]
    for log in logs:
        processes.worker("tests.apps.periodic", "--pool", "thread", "-c", "2",
                         "--loglevel", "INFO", env=env, log=log)
    wait_until(lambda: len(runs(server)) >= 2, timeout=DEADLINE, message="the first runs")
    admin = server.client()
    ticks = queue_keys("periodic", "default").ticks
    took = []
    try:
        for round_ in range(ROUNDS):
            seen = len(runs(server))
            wait_until(lambda: len(runs(server)) > seen, timeout=DEADLINE,
                       message="a run before the deletion")
            time.sleep(0.15 + 0.2 * round_)
            seen = len(runs(server))
            assert admin.delete(ticks) == 1, "the ticks key was there"
            deleted = time.monotonic()
            wait_until(lambda: len(runs(server)) > seen, timeout=DEADLINE,
                       message=f"a run after deletion {round_ + 1}")
            took.append(time.monotonic() - deleted)
    finally:
        admin.close()
    print("next run after each deletion, s:", [round(t, 2) for t in took])
    said = "".join(log.read_text(errors="replace") for log in logs)
    assert max(took) < RESUMED_S, (took, said[-4000:])
    done = runs(server)
    assert not [key for key, count in Counter(run[0] for run in done).items() if count > 1]
    assert not [key for key, count in Counter(run[1] for run in done).items() if count > 1]
    assert "written again from the app's code" in said
    for process in processes.started:
        process.send_signal(signal.SIGTERM)
    for process in processes.started:
        assert exit_code(process) == 0
