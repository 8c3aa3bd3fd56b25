"""What the lost-lease tests share (tests/crash/test_lost_lease_said_truly.py): thread
workers of ``tests.apps.basic`` on a test's redis-server, its ``slow`` task sent and
seen started (``slow`` pushes its key to ``marks:started:<key>`` on that server, then
to ``marks:done:<key>``), and what a worker's log says."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from minitask import Minitask
from tests.support.crash_kit import DEADLINE
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

SLOW = "tests.apps.basic.slow"


def marks(server: RedisServer, kind: str) -> int:
    """How many ``slow`` tasks of key ``k`` said ``kind`` (started, done) on ``server``."""
    client = server.client()
    try:
        return int(client.llen(f"marks:{kind}:k"))
    finally:
        client.close()


def said(log: Path, what: str) -> bool:
    return what in log.read_text(errors="replace")


def basic_worker(server: RedisServer, processes: Processes, log: Path,
                 visibility: float) -> None:
    """A worker process of tests.apps.basic (one thread, leases of ``visibility`` s)."""
    processes.worker("tests.apps.basic", "--pool", "thread", "-c", "1",
                     env={"MINITASK_BROKER_URL": server.url,
                          "TEST_VISIBILITY": str(visibility)}, log=log)


def slow_started(start_redis: Callable[..., RedisServer], processes: Processes, log: Path,
                 visibility: float, seconds: float) -> RedisServer:
    """A new redis-server, a worker of it (``log``, ``visibility``) and ``slow`` of
    ``seconds`` sent there, returned once the task started."""
    server = start_redis()
    basic_worker(server, processes, log, visibility)
    app = Minitask("basic", broker=server.url)
    try:
        app.send(SLOW, args=("k", seconds))
    finally:
        app.close()
    wait_until(lambda: marks(server, "started") == 1, timeout=DEADLINE, message="the start")
    return server
