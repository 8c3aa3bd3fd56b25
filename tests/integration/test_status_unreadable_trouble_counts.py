"""``minitask status`` shows a worker record's ``overrun`` or ``unconfirmed`` field
that is no whole number as unreadable, as the other counts, never as 0 (review29e F5:
it showed 0, no trouble, for a field it could not read)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from minitask.broker.keys import AppKeys
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

REGISTRY = AppKeys("basic")


def status(url: str, processes: Processes, *more: str) -> str:
    done = subprocess.run([sys.executable, "-m", "minitask", "status", "-A",
                           "tests.apps.basic", *more], cwd=processes.cwd, capture_output=True,
                          env={**processes.env, "MINITASK_BROKER_URL": url}, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace")


def test_an_unreadable_trouble_count_is_said_unreadable(
        redis_server: RedisServer, admin: Any, processes: Processes) -> None:
    now = int(time.time() * 1000)
    admin.zadd(REGISTRY.workers, {b"w1": now})
    admin.hset(REGISTRY.worker("w1"), mapping={
        "beat_ms": now, "name": "w1", "processed": 3, "overrun": "many",
        "unconfirmed": "1e5", "unconfirmed_ms": now})
    report = json.loads(status(redis_server.url, processes, "--json"))
    [worker] = report["workers"]
    assert worker["overrun"] is None and worker["unconfirmed"] is None, worker
    shown = status(redis_server.url, processes)
    assert "LEFT RUNNING: unreadable" in shown and "UNCONFIRMED: unreadable" in shown, shown
