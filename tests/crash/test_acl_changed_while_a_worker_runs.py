"""An ACL changed while a worker runs (issue 29): Redis refuses a command an outcome's
script uses part way through it, and keeps the writes made before (no rollback).
ack.lua removed the lease first: with RPUSH (the result) taken away, the message stayed
with no lease and no result, and a worker killed then lost the task for good (status
"queued", never run again). The lease is removed last now: a refusal leaves it, and
the task is delivered again once it expires (at least once). A real redis-server,
real worker processes, a real SIGKILL."""
from __future__ import annotations

from pathlib import Path

import pytest

from minitask.broker.keys import queue_keys
from tests.support.acl_workers import as_limited, worker_as
from tests.support.processes import Processes, kill_group
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("aclack", "default")


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_an_ack_refused_part_way_loses_no_task(processes: Processes, server: RedisServer,
                                               tmp_path: Path, pool: str) -> None:
    with as_limited(server, "aclack") as (admin, url, app):
        counted = app.task(name="counted")(lambda key, seconds: key)
        first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
        worker = worker_as(processes, "tests.apps.acl_ack", url, first_log, pool=pool)
        handle = counted.delay("k", 1.0)
        wait_until(lambda: admin.get("runs:k") == b"1", timeout=DEADLINE,
                   message="the task's first run")
        # taken away while it runs: its ack's result (RPUSH) is refused
        admin.execute_command("ACL", "SETUSER", "limited", "-rpush")
        wait_until(lambda: "NOPERM" in first_log.read_text() or "rpush" in
                   first_log.read_text().lower(), timeout=DEADLINE,
                   message="the ack refused")
        kill_group(worker)
        # nothing half-written that loses the task: the lease is still there
        assert admin.zscore(KEYS.leases, handle.id) is not None
        assert admin.hexists(KEYS.messages, handle.id)
        admin.execute_command("ACL", "SETUSER", "limited", "+rpush")
        worker_as(processes, "tests.apps.acl_ack", url, second_log)
        assert handle.get(timeout=DEADLINE) == "k"  # run again once its lease expired
        assert int(admin.get("runs:k") or 0) >= 2
        wait_until(lambda: admin.zcard(KEYS.leases) == 0
                   and admin.hlen(KEYS.messages) == 0, timeout=DEADLINE,
                   message="no trace of the task left")


def test_a_refusal_ended_in_time_is_recorded_with_no_lost_lease_said(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    """The probe's first half: the worker lives on and the ACL comes back well within the
    lease. Its outcome is recorded on a later try, and no "lease had expired" is said: the
    refused ack removed no lease (it said so after 3 s of a 30 s visibility_timeout)."""
    with as_limited(server, "aclack") as (admin, url, app):
        counted = app.task(name="counted")(lambda key, seconds: key)
        log = tmp_path / "worker.log"
        worker_as(processes, "tests.apps.acl_ack", url, log, visibility="30")
        handle = counted.delay("k", 0.5)
        wait_until(lambda: admin.get("runs:k") == b"1", timeout=DEADLINE,
                   message="the task's run")
        admin.execute_command("ACL", "SETUSER", "limited", "-rpush")
        wait_until(lambda: "NOPERM" in log.read_text() or "rpush" in log.read_text().lower(),
                   timeout=DEADLINE, message="the ack refused")
        admin.execute_command("ACL", "SETUSER", "limited", "+rpush")
        assert handle.get(timeout=DEADLINE) == "k"
        wait_until(lambda: "succeeded" in log.read_text(), timeout=DEADLINE,
                   message="the success logged")
        assert "lease had expired" not in log.read_text()
        assert admin.get("runs:k") == b"1"


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_lease_lost_while_refused_is_told_with_the_refusal(
        processes: Processes, server: RedisServer, tmp_path: Path, pool: str) -> None:
    """Refused for its ``visibility_timeout``, the first worker's outcome is given up
    (one ERROR naming the ACL refusal and the redelivery, not that the task stalled:
    raise visibility_timeout); the task runs again on another worker, recorded there."""
    with as_limited(server, "aclack") as (admin, url, app):
        counted = app.task(name="counted")(lambda key, seconds: key)
        first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
        worker_as(processes, "tests.apps.acl_ack", url, first_log, pool=pool)
        counted.delay("k", 0.5)
        wait_until(lambda: admin.get("runs:k") == b"1", timeout=DEADLINE,
                   message="the task's first run")
        admin.execute_command("ACL", "SETUSER", "limited", "-rpush")
        wait_until(lambda: "NOPERM" in first_log.read_text()
                   or "rpush" in first_log.read_text().lower(), timeout=DEADLINE,
                   message="the ack refused")
        # another user's worker takes the task once the lease expires
        worker_as(processes, "tests.apps.acl_ack", server.url, second_log)
        wait_until(lambda: admin.get("runs:k") == b"2", timeout=DEADLINE,
                   message="the task run again")
        wait_until(lambda: "succeeded" in second_log.read_text(), timeout=DEADLINE,
                   message="the second run recorded")
        admin.execute_command("ACL", "SETUSER", "limited", "+rpush")
        wait_until(lambda: "the task is delivered again once the lease expires"
                   in first_log.read_text(), timeout=DEADLINE,
                   message="the given-up outcome told with the refusal")
        assert "raise visibility_timeout" not in first_log.read_text()
