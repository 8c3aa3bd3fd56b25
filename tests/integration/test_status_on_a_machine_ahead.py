"""``minitask status`` run on a machine whose clock is an hour ahead of Redis's counts
a live worker live: heartbeats are written on Redis's clock (worker/redis_time.py),
and status reads their ages on it too (it said "0 live worker(s)"). The worker and
the status command both run with tests.apps.skewed's clock, in real processes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AHEAD = {"TEST_CLOCK_AHEAD_S": "3600"}


def _status(processes: Processes, url: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "minitask", "status", "-A",
                           "tests.apps.skewed", "--json"], cwd=ROOT,
                          env={**processes.env, **AHEAD, "MINITASK_BROKER_URL": url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_status_on_a_machine_an_hour_ahead_counts_the_live_worker(
        processes: Processes, redis_server: RedisServer) -> None:
    client = redis_server.client()
    client.flushall()
    processes.worker("tests.apps.skewed", "--pool", "thread", "-c", "1", "--name", "ahead",
                     env={**AHEAD, "MINITASK_BROKER_URL": redis_server.url})
    report = wait_until(
        lambda: (lambda found: found if found["workers"] else None)(
            _status(processes, redis_server.url)),
        timeout=30, message="the live worker counted live")
    assert [worker["name"] for worker in report["workers"]] == ["ahead"]
    assert report["workers_ahead"] == []
    assert any("this machine's clock is 3600" in warning for warning in report["warnings"])
    client.close()
