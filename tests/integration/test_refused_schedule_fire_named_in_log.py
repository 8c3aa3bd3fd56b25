"""A schedule fire Redis refuses (an ACL changed while the worker runs) is logged as
the schedule fire it is, and its end as such: before, the worker said "Redis refused
to fetch tasks: could not fire schedule(s) ..." and "Redis is back (fetch tasks)".
Test-owned redis-server, an ACL user, a real worker process (tests/apps/late_ticks.py:
a schedule of every second on queue "late")."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest
import redis

from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.processes import Processes, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_refused_schedule_fire_is_named_as_such(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path) -> None:
    url = user_without(admin, server, "nothing")
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.late_ticks", "-Q", "late", "--pool", "thread",
                              "-c", "1", env={"MINITASK_BROKER_URL": url}, log=log)
    wait_until(lambda: "each_second" in log.read_text() and "succeeded" in log.read_text(),
               timeout=60, message="a tick ran")
    admin.execute_command("ACL", "SETUSER", "limited", "-hset")
    try:
        wait_until(lambda: "Redis refused to" in log.read_text(), timeout=30,
                   message="the refusal logged")
    finally:
        admin.execute_command("ACL", "SETUSER", "limited", "+hset")
    wait_until(lambda: "Redis is back" in log.read_text(), timeout=30, message="back")
    send(worker, signal.SIGTERM, group=True)
    worker.wait(timeout=60)
    text = log.read_text()
    refused = [line for line in text.splitlines() if "Redis refused to" in line]
    assert refused and "Redis refused to fire schedules: could not fire" in refused[0], text
    assert "Redis is back (fire schedules)" in text, text
    assert "refused to fetch tasks: could not fire" not in text
