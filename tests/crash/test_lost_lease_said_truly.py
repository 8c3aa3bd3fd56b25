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

from minitask.broker.keys import queue_keys
from tests.support.crash_kit import DEADLINE
from tests.support.lost_leases import basic_worker, marks, said, slow_started
from tests.support.processes import Processes, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

LOST = "Redis lost it"
EXPIRED = "its lease had expired"


def test_lease_lost_with_the_server_restarted_empty_is_not_said_expired(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    server = slow_started(start_redis, processes, log, visibility=60.0, seconds=3.0)
    server.stop()  # SIGKILL, no persistence: started again empty, on the same port
    server.start()
    try:
        wait_until(lambda: said(log, LOST) or said(log, EXPIRED),
                   timeout=DEADLINE, message="the lost lease said")
    except AssertionError:
        print(log.read_text(errors="replace")[-4000:])
        raise
    text = log.read_text(errors="replace")
    assert LOST in text and "not expiry" in text, text[-4000:]
    assert EXPIRED not in text and "raise visibility_timeout" not in text, text[-4000:]


def test_lease_that_expired_is_said_expired(
        start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path) -> None:
    first_log = tmp_path / "first.log"
    server = slow_started(start_redis, processes, first_log, visibility=3.0, seconds=2.0)
    first = processes.started[0]
    send(first, signal.SIGSTOP)  # no renewal: its lease expires, another worker runs it
    try:
        basic_worker(server, processes, tmp_path / "second.log", 3.0)
        # its outcome recorded too: the first worker's, were it first, would take the
        # lease the second holds (a lease names the task, not its holder), said by neither
        leases = queue_keys("basic", "default").leases
        client = server.client()
        try:
            wait_until(lambda: marks(server, "done") == 1 and not client.zcard(leases),
                       timeout=DEADLINE, message="the second worker's run recorded")
        finally:
            client.close()
    finally:
        send(first, signal.SIGCONT)
    wait_until(lambda: said(first_log, EXPIRED) or said(first_log, LOST),
               timeout=DEADLINE, message="the first worker's lost lease said")
    text = first_log.read_text(errors="replace")
    assert EXPIRED in text and LOST not in text, text[-4000:]
