"""An ACL changed while a real worker carries a chain on (issue 29): RPUSH taken away as
the chain's first step runs, so the spawn of the next step is refused part way (Redis
keeps the writes made before a refused command). spawn.lua wrote the step's "sent"
marker first: the worker's retry, the ACL back, skipped a step never queued, and the
chain never ended. The marker is written last now: the retry sends the step once. A
real redis-server and a real worker process (thread pool)."""
from __future__ import annotations

from pathlib import Path

import pytest

from minitask import chain
from tests.support.acl_workers import as_limited, worker_as
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


def test_a_chain_step_refused_part_way_runs_once_when_the_acl_is_back(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    with as_limited(server, "aclack") as (admin, url, app):
        counted = app.task(name="counted")(lambda key, seconds: key)
        log = tmp_path / "worker.log"
        worker_as(processes, "tests.apps.acl_ack", url, log, visibility="30")
        # a chain first: the worker's sending ACL check, asked at its first send, passed
        warm = chain(counted.si("warm", 0.0), counted.si("warmed", 0.0)).delay()
        assert warm.get(timeout=DEADLINE) == "warmed"
        handle = chain(counted.si("first", 1.0), counted.si("second", 0.0)).delay()
        wait_until(lambda: admin.get("runs:first") == b"1", timeout=DEADLINE,
                   message="the first step's run")
        # taken away while it runs: the next step's push (RPUSH) is refused
        admin.execute_command("ACL", "SETUSER", "limited", "-rpush")
        wait_until(lambda: "refused" in log.read_text(), timeout=DEADLINE,
                   message="the next step's sending refused")
        admin.execute_command("ACL", "SETUSER", "limited", "+rpush")
        assert handle.get(timeout=DEADLINE) == "second"
        assert admin.get("runs:second") == b"1"
        assert admin.get("runs:first") == b"1"
