"""The worker registry, or a worker's record, of another type (data minitask did not
write) on a real redis-server (issue 29, probe33 F5): the heartbeat said so and left it,
so every live worker was missing for good from ``minitask status``, the dashboard,
``/metrics`` and ``minitask shutdown`` (which then could not stop them). The next
heartbeat now moves it aside whole, said once, and lists the worker again."""
from __future__ import annotations

from pathlib import Path

import pytest
import redis

from minitask.broker.keys import AppKeys
from tests.support.cli import said
from tests.support.listed_workers import listed_worker
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

APP = "tests.apps.foreign"
REGISTRY = AppKeys("foreign")
DEADLINE = 60.0


@pytest.mark.parametrize("planted", ["registry", "record"])
def test_the_heartbeat_sets_it_aside_and_the_worker_is_listed_and_stopped_again(
        planted: str, admin: "redis.Redis[bytes]", processes: Processes,
        redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    log = tmp_path / "worker.log"
    worker, worker_id = listed_worker(processes, admin, APP, "foreign", "listed",
                                      redis_server.url, log, DEADLINE)
    key = REGISTRY.workers if planted == "registry" else REGISTRY.worker(worker_id)
    pipe = admin.pipeline(transaction=True)
    pipe.delete(key)
    pipe.set(key, b"not mine")
    pipe.execute()
    wait_until(lambda: admin.get(f"{key}:foreign") == b"not mine", timeout=DEADLINE,
               message=f"the heartbeat set {key} aside")
    wait_until(lambda: admin.zscore(REGISTRY.workers, worker_id) is not None
               and admin.type(REGISTRY.worker(worker_id)) == b"hash",
               timeout=DEADLINE, message="the worker listed again")
    code, text = said("status", "-A", APP)
    assert code == 0 and "1 live worker(s)" in text, text
    code, text = said("shutdown", "-A", APP, "--all", "--yes")
    assert code == 0, text
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text()
    assert text.count(f"moved aside to {key}:foreign") == 1, text
    assert "lost Redis" not in text and "Redis refused" not in text, text
