"""A worker whose ACL lacks TIME keeps its own clock and compares other workers' lease
deadlines with it: an hour off, it took their leases (their tasks ran twice). It says
so as it starts, as a WARNING naming why (+time), how far off it seems by the newest
heartbeat in the registry, and the risk when that is past half the visibility_timeout.
Before, one INFO line said it kept its own clock, with no size and no risk.
Test-owned redis-server, an ACL user without TIME, real worker processes."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aclsends"  # tests/apps/acl_sends.py: the worker's


def _start_log(processes: Processes, url: str, log: Path) -> str:
    worker = processes.worker("tests.apps.acl_sends", "--pool", "thread", "-c", "1",
                              "--burst", env={"MINITASK_BROKER_URL": url}, log=log)
    assert exit_code(worker) == 0
    return log.read_text()


@pytest.mark.parametrize("off_s, risk", [(3600, "it may take the leases"),
                                         (-3600, "they may take the leases"),
                                         (1, None)])
def test_a_worker_without_time_warns_with_its_skew_and_the_risk(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path, off_s: int, risk: str) -> None:
    url = user_without(admin, server, "time")
    seconds, micros = admin.time()
    now_ms = seconds * 1000 + micros // 1000
    # a live worker's heartbeat as if this worker's clock were off_s ahead of it
    admin.zadd(f"minitask:{{{APP}}}:workers", {"other": now_ms - off_s * 1000})
    text = _start_log(processes, url, tmp_path / "worker.log")
    lines = [line for line in text.splitlines() if "cannot ask Redis its time" in line]
    assert len(lines) == 1 and "WARNING" in lines[0], text
    assert "+time" in lines[0]
    if risk is None:
        assert "twice" not in lines[0]
    else:
        # the worker's start-up takes a while on a loaded machine: an hour, give or take
        said = re.search(r"some ([0-9.]+) s (ahead of|behind) theirs", lines[0])
        assert said is not None and 3500 < float(said.group(1)) < 3700, lines[0]
        assert said.group(2) == ("ahead of" if off_s > 0 else "behind")
        assert risk in lines[0] and "twice" in lines[0], lines[0]


def test_a_worker_without_time_and_no_other_worker_still_warns(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path) -> None:
    text = _start_log(processes, user_without(admin, server, "time"), tmp_path / "worker.log")
    lines = [line for line in text.splitlines() if "cannot ask Redis its time" in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "no other worker" in lines[0], text
