"""An outcome write Redis's ACL refuses that is no workflow step (an ack, a dead
letter: the task's result key refused) was retried until the task's lease expired,
which its worker renews: for ever, holding the slot; with ``-c 1`` the whole queue
stalled. Now it is retried for ``visibility_timeout``, then given up: one ERROR names
the ACL problem, the slot is freed (the next task runs), and the task, whose lease is
no longer renewed, is delivered again once it expires: never lost. Once the ACL is
fixed it is recorded (a success acked, a failure dead-lettered). A real redis-server
and real worker processes, on every pool."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import TaskHandle
from minitask.errors import ResultTimeout
from tests.support.acl_queues import USER, all_but_results, widen
from tests.support.acl_workers import acl_checked, worker_as
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
#: The worker's visibility_timeout: how long a refused write is retried.
BOUND = "3"
#: The released task's ERROR (``acl_steps.released_said``).
RELEASED = "the task is delivered again once the lease expires"


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
@pytest.mark.parametrize("task", ["add", "boom"])
def test_a_refused_outcome_frees_its_slot_and_the_task_comes_again(
        processes: Processes, server: RedisServer, tmp_path: Path, pool: str,
        task: str) -> None:
    with acl_checked(server, "aclout") as (admin, app):
        add = app.task(name="add")(lambda x, y=0: x + y)
        boom = app.task(name="boom", retries=0)(lambda: None)
        url = all_but_results(admin, server, "aclout", "default", "z")
        log = tmp_path / "worker.log"
        worker_as(processes, "tests.apps.acl_outcomes", url, log, "-Q", "default", pool=pool,
                  visibility=BOUND)
        refused = (add.apply_async((1, 2), task_id="z-refused") if task == "add" else
                   boom.apply_async(task_id="z-refused"))
        # an id of its own: a random one starts with "z" one time in 64, and its result
        # would be refused too (CI saw it: zFzWs-... "still running" for a minute)
        after = add.apply_async((20, 22), task_id="a-after")
        # the slot is freed: the next task on the queue runs
        assert got(after, log) == 42, log.read_text()
        said = wait_until(lambda: [line for line in log.read_text().splitlines()
                                   if RELEASED in line], timeout=DEADLINE,
                          message="the released task's ERROR")
        assert "ERROR" in said[0] and f"'{USER}'" in said[0], said
        assert "z-refused" in said[0] and "~minitask:{aclout:default}:*" in said[0], said
        # never lost: once the ACL is fixed, it comes again and is recorded
        widen(admin, "aclout", "default")
        if task == "add":
            assert got(refused, log) == 3, log.read_text()
        else:
            dead = wait_until(lambda: app.dead_letters("default"), timeout=DEADLINE,
                              message="the dead letter")
            assert [letter.task_id for letter in dead] == ["z-refused"], dead


def got(handle: "TaskHandle[Any]", log: Path) -> Any:
    """The task's value; a timeout fails the test with the worker's log (what it did)."""
    try:
        return handle.get(timeout=DEADLINE)
    except ResultTimeout as exc:
        pytest.fail(f"{exc}\nthe worker's log:\n{log.read_text()}")
