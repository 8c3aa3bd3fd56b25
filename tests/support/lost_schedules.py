"""What the tests of decorated schedules Redis loses under a running worker share: the
worker (``tests.apps.periodic``, ``tick`` every 0.5 s), the ticks it ran, the check that
they resumed once each, and its stop."""
from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Callable, List

from tests.support.crash_kit import DEADLINE
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

SCHEDULE = [{"name": "tick", "task": "beat", "every": 0.5}]
#: Ticks must resume within this long of the loss (a read at the next tick finds it).
RESUMED_S = 15.0


def ticks(server: RedisServer, after: float) -> List[str]:
    client = server.client()
    try:
        runs = [raw.decode().split("|") for raw in client.lrange("marks:run:tick", 0, -1)]
    finally:
        client.close()
    return [run[0] for run in runs if float(run[1]) > after]


def start_worker(server: RedisServer, processes: Processes, log: Path) -> None:
    env = {"MINITASK_BROKER_URL": server.url, "TEST_PERIODIC": json.dumps(SCHEDULE)}
    processes.worker("tests.apps.periodic", "--pool", "thread", "-c", "2", "--loglevel", "INFO",
                     env=env, log=log)
    wait_until(lambda: len(ticks(server, 0.0)) >= 2, timeout=DEADLINE,
               message="the first ticks")


def resumed(server: RedisServer, after: float, log: Path) -> None:
    try:
        wait_until(lambda: len(ticks(server, after)) >= 3, timeout=RESUMED_S,
                   message=f"ticks of 'tick' within {RESUMED_S} s of losing its record")
    except AssertionError:
        print(log.read_text(errors="replace")[-6000:])
        raise
    ids = ticks(server, 0.0)
    assert not [name for name, count in Counter(ids).items() if count > 1]  # once a tick
    assert "written again from the app's code" in log.read_text(errors="replace")


def lose_and_resume(start_redis: Callable[..., RedisServer], processes: Processes,
                    log: Path, lose: Callable[[RedisServer], None]) -> None:
    """A worker on a fresh server ticking, ``lose`` done to the server under it, then
    its ticks resumed (each once) and the worker stopped cleanly."""
    server = start_redis()
    start_worker(server, processes, log)
    lose(server)
    resumed(server, time.time(), log)
    stopped(processes)


def stopped(processes: Processes) -> None:
    for process in processes.started:
        process.send_signal(signal.SIGTERM)
        assert exit_code(process) == 0
