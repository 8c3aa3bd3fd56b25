"""A chain step sent to a queue whose keys the worker's Redis ACL user may not write
(issue 29, M1): the ack carrying the chain on was refused (NOPERM) and retried for
ever; the task stayed leased and, with ``-c 1``, the whole queue stalled, nothing
dead-lettered. The refusal is retried for visibility_timeout at most; then the task
is dead-lettered, naming the step, the queue's key and the ACL user, the slot is free
(the next task runs), and a requeue once the ACL is fixed carries the chain on. A
real redis-server and real worker processes, on every pool."""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from minitask import chain
from minitask.admin.dead import DeadTask
from tests.support.acl_queues import USER, queue_user, widen
from tests.support.acl_workers import acl_checked, worker_as
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
#: The worker's visibility_timeout: how long a refused step is retried.
BOUND = "3"


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_refused_step_is_dead_lettered_and_requeued_once_fixed(
        processes: Processes, server: RedisServer, tmp_path: Path, pool: str) -> None:
    with acl_checked(server, "aclsteps") as (admin, app):
        add = app.task(name="add")(lambda x, y=0: x + y)
        other = app.task(name="other", queue="other")(lambda x: x)
        url = queue_user(admin, server, "aclsteps", "default")
        log = tmp_path / "worker.log"
        worker_as(processes, "tests.apps.acl_steps", url, log, "-Q", "default", pool=pool,
                  visibility=BOUND)
        handle = chain(add.s(1, 2), other.s()).delay()
        after = add.delay(20, 22)
        # the slot is freed: the next task on the queue runs
        assert after.get(timeout=DEADLINE) == 42, log.read_text()
        dead: List[DeadTask] = wait_until(lambda: app.dead_letters("default"),
                                          timeout=DEADLINE, message="the dead letter")
        assert len(dead) == 1 and dead[0].name == "add", dead
        letter = dead[0]
        assert letter.exc_type == "WorkflowStepRefused", letter
        for named in ("'other'", f"'{USER}'", "minitask:{aclsteps:other}:messages",
                      "~minitask:{aclsteps:other}:*", "requeue"):
            assert named in letter.message, letter.message
        assert "ACL" in letter.reason, letter.reason
        # the workflow is held, neither failed nor carried on
        assert app.dead_letters("other") == []
        assert not admin.exists("minitask:{aclsteps:other}:messages")

        widen(admin, "aclsteps", "other")
        assert app.requeue_dead(letter.task_id)
        processes.worker("tests.apps.acl_steps", "-Q", "other", "--pool", "thread",
                         log=tmp_path / "other.log", env={"MINITASK_BROKER_URL": url})
        assert handle.get(timeout=DEADLINE) == 3, log.read_text()
        assert app.dead_letters("default") == []
