"""The process pool's supervision: one child SIGKILLed is replaced and its task delivered
again; children never outlive their SIGKILLed supervisor (an OOM kill picks one process,
not the group) to go on serving unsupervised."""
from __future__ import annotations

import os
import signal

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.procfs import descendants, pid_running
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash


def test_sigkilled_pool_child_is_replaced_and_its_task_delivered_again(kit: Kit) -> None:
    worker = kit.worker("--pool", "process", "-c", "2")
    handle = kit.tasks.slow.delay("child", 1.5)
    child = kit.wait_for_marks("started", "child")[0].pid
    assert child in descendants(worker.pid)

    os.kill(child, signal.SIGKILL)

    done = kit.wait_for_marks("done", "child")
    wait_until(lambda: len([p for p in descendants(worker.pid) if pid_running(p)]) == 2,
               timeout=DEADLINE, message="the dead child to be replaced")
    assert child not in descendants(worker.pid)
    others = [kit.tasks.record.delay(f"after-{i}") for i in range(4)]
    for index, other in enumerate(others):
        assert other.get(timeout=DEADLINE) == f"after-{index}"
    kit.wait_until_drained()

    started = kit.marks("started", "child")
    assert len(started) == 2 and len(done) == 1, (started, done)
    assert done[0].pid != child
    assert [m.attempt for m in started + done] == [1, 1, 1], "a crash is no failed attempt"
    assert handle.status() == "succeeded"
    assert worker.poll() is None, "the supervisor lives on"
    kit.assert_nothing_left()


def test_pool_children_do_not_outlive_a_sigkilled_supervisor(kit: Kit) -> None:
    supervisor = kit.worker("--pool", "process", "-c", "2")
    handle = kit.tasks.slow.delay("orphan", 1.5)
    kit.wait_for_marks("started", "orphan")
    children = descendants(supervisor.pid)
    assert len(children) == 2, children

    os.kill(supervisor.pid, signal.SIGKILL)  # the supervisor only, as the OOM killer does
    supervisor.wait(timeout=30)

    kit.worker("--pool", "process", "-c", "2")
    wait_until(lambda: kit.marks("done", "orphan"), timeout=DEADLINE,
               message="the task to be done")
    assert handle.get(timeout=DEADLINE) == "orphan"
    wait_until(lambda: not any(pid_running(p) for p in children), timeout=30,
               message=f"the children {children} of the killed supervisor to exit")
    kit.wait_until_drained()
    kit.assert_nothing_left()
