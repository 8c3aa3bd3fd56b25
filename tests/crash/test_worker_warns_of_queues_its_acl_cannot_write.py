"""A worker whose Redis ACL user's key patterns cover the queues it serves, but not
another queue the app's tasks declare (issue 29, M1): it passed its start check
silently, then every workflow step sent there was refused. It starts, and says so in
one WARNING naming the queue, the ACL user and the key pattern to add; a user who may
write every queue hears nothing; one refused a served queue still does not start
(exit 2). A real redis-server and real worker processes."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List

import pytest

from tests.support.acl import acl_user
from tests.support.acl_queues import USER, queue_user
from tests.support.acl_workers import acl_checked, worker_as
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
SAID = "may not write the keys of queue(s)"


def start(processes: Processes, url: str, log: Path, *queues: str) -> Any:
    return worker_as(processes, "tests.apps.acl_steps", url, log, "-Q", ",".join(queues),
                     visibility=None)


def said(log: Path) -> List[str]:
    return [line for line in log.read_text().splitlines() if SAID in line]


def test_a_queue_the_user_cannot_write_is_said_once_at_start(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    with acl_checked(server, "aclsteps") as (admin, app):
        add = app.task(name="add")(lambda x, y=0: x + y)
        narrow = queue_user(admin, server, "aclsteps", "default")
        log = tmp_path / "narrow.log"
        worker = start(processes, narrow, log, "default")
        assert add.delay(1, 2).get(timeout=DEADLINE) == 3  # it started, and serves
        lines = said(log)
        assert len(lines) == 1, log.read_text()
        assert lines[0].split()[2] == "WARNING", lines[0]
        assert "'other'" in lines[0] and f"'{USER}'" in lines[0]
        assert "~minitask:{aclsteps:other}:*" in lines[0]
        assert "'default'" not in lines[0].split(SAID)[1].split(":")[0]
        assert worker.poll() is None

        # every queue writable: nothing said
        broad = acl_user(admin, server, "broad", "~minitask:*", "&*", "+@all")
        quiet = tmp_path / "broad.log"
        start(processes, broad, quiet, "default")
        assert add.delay(2, 3).get(timeout=DEADLINE) == 5
        assert said(quiet) == [], quiet.read_text()

        # a served queue refused: still no start
        refused = tmp_path / "refused.log"
        assert exit_code(start(processes, narrow, refused, "default", "other")) == 2, (
            refused.read_text())
