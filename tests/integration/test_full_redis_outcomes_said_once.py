"""Outcomes a full Redis refuses (maxmemory reached, noeviction) are ridden out as a
batch, said once: the worker went on to record them one by one at every retry, each
refused alike, and said "Redis refused to record N outcome(s) together ...; recording
them one by one" about twice a second for as long as Redis stayed full (issue 29,
probe36 F3). Once Redis has room again, every outcome is recorded. A real
redis-server of the test's own and a real worker process of tests/apps/full_redis.py."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, List

import pytest

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DEADLINE = 60.0
#: Tasks running as Redis fills: their outcomes wait, refused, together.
RUNNING = 6
#: How long Redis stays full: several of the worker's retries.
FULL_FOR = 8.0
ONE_BY_ONE = "recording them one by one"


def producer(server: RedisServer) -> Minitask:
    app = Minitask("fullredis", broker=server.url)

    @app.task(name="nap")
    def nap(n: int, seconds: float) -> int:
        return n

    return app


def test_a_full_redis_is_ridden_out_and_said_once(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    server = start_redis()
    admin = server.client()
    app = producer(server)
    log = tmp_path / "worker.log"
    try:
        worker = processes.worker("tests.apps.full_redis", "--pool", "thread", "-c",
                                  str(RUNNING), env={"MINITASK_BROKER_URL": server.url},
                                  log=log)
        handles = [app.tasks["nap"].delay(n, 2.0) for n in range(RUNNING)]
        wait_until(lambda: all(handle.status() == "running" for handle in handles),
                   timeout=DEADLINE, message="every task to start")
        admin.config_set("maxmemory", 1)  # noeviction (the default): writes refused
        try:
            time.sleep(FULL_FOR)  # the tasks end, their outcomes refused, retried
            said = log.read_text(errors="replace")
        finally:
            admin.config_set("maxmemory", 0)
        assert "out of memory" in said, said
        assert said.count(ONE_BY_ONE) <= 1, said
        results: List[int] = [handle.get(timeout=DEADLINE) for handle in handles]
        assert sorted(results) == list(range(RUNNING))
        assert worker.poll() is None, "the worker exited"
    finally:
        app.close()
        admin.close()
