"""The asyncio pool records outcomes on a few threads beside its loop (at most four);
an outcome write Redis refuses or cannot take is retried with backoff in one of them
(Redis's ACL refusing a chain's next step: for ``visibility_timeout``). With as many
such writes as recording threads (four chains whose next step goes to a queue whose
keys the worker's user may not write), every thread slept in its backoff and the
pool's other slots stalled with them: their tasks ran but were never recorded, nor
their slots given the next task. A waiting step now has a spare thread stand in for
it. A real redis-server and a real worker, ``-c 6``."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from minitask import chain
from tests.support.acl_queues import queue_user
from tests.support.acl_workers import acl_checked, worker_as
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
#: The worker's visibility_timeout: the refused step is retried this long, far longer
#: than the other tasks are given to complete.
BOUND = "120"
#: Tasks whose outcome write is refused: as many as the pool's recording threads.
REFUSED = 4
#: Tasks run while the refused one's outcome write is retried.
OTHERS = 8
#: Seconds the others are given once the first of them completed (a loaded machine).
GIVEN = 20.0


def test_other_async_tasks_complete_while_one_outcome_write_is_refused(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    with acl_checked(server, "aclsteps") as (admin, app):
        add = app.task(name="add")(lambda x, y=0: x + y)
        other = app.task(name="other", queue="other")(lambda x: x)
        url = queue_user(admin, server, "aclsteps", "default")
        log = tmp_path / "worker.log"
        worker_as(processes, "tests.apps.acl_steps", url, log, "-Q", "default",
                  pool="asyncio", slots=6, visibility=BOUND)
        for _ in range(REFUSED):
            chain(add.s(1, 2), other.s()).delay()
        # the refused write is being retried: its task stays leased
        wait_until(lambda: "NOPERM" in log.read_text() or "permission" in log.read_text(),
                   timeout=DEADLINE, message="the refused step in the worker's log")
        handles = [add.delay(index, 1) for index in range(OTHERS)]
        assert handles[0].get(timeout=DEADLINE) == 1, log.read_text()
        until = time.monotonic() + GIVEN
        for index, handle in enumerate(handles):
            left = max(0.1, until - time.monotonic())
            assert handle.get(timeout=left) == index + 1, log.read_text()
