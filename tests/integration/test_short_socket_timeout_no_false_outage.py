"""A broker URL with a short socket timeout (``?socket_timeout=2``, a common setting)
leaves a healthy, idle worker quiet: its orders listener and its cancel watch blocked
in Redis for up to 5 s, past the socket's timeout, and the worker logged "ERROR lost
Redis while trying to listen for minitask shutdown orders / wait for cancel requests",
then backed off for 8-30 s (issue 29, probe35 M4). A real redis-server, a real worker
process; it still runs a task and still stops on ``minitask shutdown``."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Long enough for two of the old 5 s blocks past a 2 s socket timeout
QUIET_FOR = 7.0


def test_an_idle_worker_with_a_short_socket_timeout_logs_no_outage(
        redis_server: RedisServer, processes: Processes, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/3?socket_timeout=2"
    client = redis_server.client(db=3)
    client.flushdb()
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.basic", "--pool", "thread", "-c", "1",
                              env={"MINITASK_BROKER_URL": url}, log=log)
    deadline = time.monotonic() + 60
    while b"minitask worker " not in log.read_bytes() and time.monotonic() < deadline:
        assert worker.poll() is None, log.read_text()
        time.sleep(0.1)
    assert b"minitask worker " in log.read_bytes(), log.read_text()
    time.sleep(QUIET_FOR)  # idle: every wait blocks in Redis

    said = log.read_text()
    assert "lost Redis" not in said and "ERROR" not in said, said
    done = processes.start("-m", "minitask", "shutdown", "-A", "tests.apps.basic", "--all", "--yes",
                           env={"MINITASK_BROKER_URL": url})
    assert exit_code(done) == 0
    assert exit_code(worker) == 0, log.read_text()
    client.flushdb()
    client.close()
