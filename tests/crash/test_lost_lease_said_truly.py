"""What a worker says of a lease Redis no longer holds as it records an outcome is true.

A thread worker of ``tests.apps.basic`` runs ``slow``; Redis is killed (no persistence)
and started again empty on its port while it runs. The worker renewed the lease and
it had most of its 60 s left: the outcome's write finds no lease because Redis lost
it. The worker said "its lease had expired" (raise visibility_timeout), which sent
the operator the wrong way; now it says Redis lost it. A lease that did expire (its
worker stopped with SIGSTOP past it, its task run by another worker meanwhile) is
still said to have expired.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Callable

import pytest

from minitask import Minitask
from tests.support.crash_kit import DEADLINE
from tests.support.processes import Processes, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

SLOW = "tests.apps.basic.slow"
LOST = "Redis lost it"
EXPIRED = "its lease had expired"


def _marks(server: RedisServer, kind: str) -> int:
    client = server.client()
    try:
        return int(client.llen(f"marks:{kind}:k"))
    finally:
        client.close()


def _send_slow(server: RedisServer, seconds: float) -> None:
    app = Minitask("basic", broker=server.url)
    try:
        app.send(SLOW, args=("k", seconds))
    finally:
        app.close()


def _said(log: Path, what: str) -> bool:
    return what in log.read_text(errors="replace")


def _worker(server: RedisServer, processes: Processes, log: Path, visibility: float) -> None:
    processes.worker("tests.apps.basic", "--pool", "thread", "-c", "1",
                     env={"MINITASK_BROKER_URL": server.url,
                          "TEST_VISIBILITY": str(visibility)}, log=log)


def test_lease_lost_with_the_server_restarted_empty_is_not_said_expired(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    server, log = start_redis(), tmp_path / "worker.log"
    _worker(server, processes, log, 60.0)
    _send_slow(server, 3.0)
    wait_until(lambda: _marks(server, "started") == 1, timeout=DEADLINE, message="the start")
    server.stop()  # SIGKILL, no persistence: started again empty, on the same port
    server.start()
    try:
        wait_until(lambda: _said(log, LOST) or _said(log, EXPIRED),
                   timeout=DEADLINE, message="the lost lease said")
    except AssertionError:
        print(log.read_text(errors="replace")[-4000:])
        raise
    text = log.read_text(errors="replace")
    assert LOST in text and "not expiry" in text, text[-4000:]
    assert EXPIRED not in text and "raise visibility_timeout" not in text, text[-4000:]


def test_lease_that_expired_is_said_expired(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    server, first_log = start_redis(), tmp_path / "first.log"
    _worker(server, processes, first_log, 3.0)
    _send_slow(server, 2.0)
    wait_until(lambda: _marks(server, "started") == 1, timeout=DEADLINE, message="the start")
    first = processes.started[0]
    send(first, signal.SIGSTOP)  # no renewal: its lease expires, another worker runs it
    try:
        _worker(server, processes, tmp_path / "second.log", 3.0)
        wait_until(lambda: _marks(server, "done") == 1, timeout=DEADLINE,
                   message="the second worker's run")
    finally:
        send(first, signal.SIGCONT)
    wait_until(lambda: _said(first_log, EXPIRED) or _said(first_log, LOST),
               timeout=DEADLINE, message="the first worker's lost lease said")
    text = first_log.read_text(errors="replace")
    assert EXPIRED in text and LOST not in text, text[-4000:]
