"""A worker whose machine clock steps an hour (an NTP step, a VM resumed) while it
serves goes on by Redis's time: between two measures of its offset a reading is
Redis's time at the last one plus the monotonic clock's progress, so it takes no
running task of a healthy worker as "lease expired" in the seconds before it measures
again (it ran them a second time). Real worker processes on a real redis-server; the
step is tests.apps.jumping's."""
from __future__ import annotations

import pytest

import tests.apps.jumping as jumping
from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: How long the honest worker's task runs (s): the stepping one serves meanwhile.
HELD = 15.0
QUICK = 6


@pytest.mark.parametrize("pool,step", [("thread", 3600), ("process", 3600)])
def test_a_clock_step_takes_no_task_of_a_healthy_worker(kit: Kit, pool: str, step: int) -> None:
    honest = kit.worker("--pool", "thread", "-c", "1", "--name", "honest")
    held = kit.tasks.slow.delay("held", HELD)
    assert kit.wait_for_marks("started", "held")[0].pid == honest.pid

    log = kit.logs / f"worker-{len(kit.workers)}.log"
    env = {**kit.env(), "TEST_CLOCK_JUMP_S": str(step)}
    stepping = kit.processes.worker("tests.apps.jumping", "--pool", pool, "-c", "1",
                                    "--name", "stepping", env=env, log=log)
    kit.workers.append(stepping)
    first = kit.tasks.record.delay("before-the-step")
    assert first.get(timeout=DEADLINE) == "before-the-step"  # it serves
    # its clock steps in a task; the outcome goes out with the next fetch, before any
    # heartbeat measures the offset again: each fetch of these compares the held
    # task's lease with the stepping worker's clock
    step_clock = kit.tasks.app.task(name="step_clock")(jumping.step_clock.func)
    stepped = step_clock.delay()
    quick = [kit.tasks.record.delay(f"quick-{index}") for index in range(QUICK)]
    assert stepped.get(timeout=DEADLINE) != honest.pid
    for index, handle in enumerate(quick):
        assert handle.get(timeout=DEADLINE) == f"quick-{index}"
    assert not kit.marks("done", "held"), "the machine is too slow for this test"

    assert len(kit.marks("started", "held")) == 1, "the held task was started again"
    assert int(kit.client.hget(QUEUE.deliveries, held.id) or 0) == 1
    assert held.get(timeout=DEADLINE) == "held"
    wait_until(lambda: kit.marks("done", "held"), timeout=DEADLINE,
               message="the held task's done marker")
    marks = kit.marks("started", "held") + kit.marks("done", "held")
    assert [(mark.pid, mark.delivery) for mark in marks] == [(honest.pid, 1)] * 2
    assert stepping.poll() is None and honest.poll() is None
