"""A worker whose clock runs an hour ahead of Redis's goes by Redis's time: it takes
no running task of a healthy worker as "lease expired" (which would run it twice),
and starts no delayed task early; one an hour behind writes leases no healthy worker
takes. Both workers are real processes on a real redis-server; the skewed clock is
tests.apps.skewed's (``time.time`` shifted)."""
from __future__ import annotations

import pytest

from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: How far ahead the second worker's clock runs (s): far past any lease.
AHEAD = 3600
#: How long the honest worker's task runs (s): the fast one starts and serves meanwhile.
HELD = 15.0
QUICK = 4


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_an_hour_ahead_takes_no_task_of_a_healthy_one(kit: Kit, pool: str) -> None:
    honest = kit.worker("--pool", "thread", "-c", "1", "--name", "honest")
    held = kit.tasks.slow.delay("held", HELD)
    started = kit.wait_for_marks("started", "held")
    assert started[0].pid == honest.pid
    later = kit.tasks.record.apply_in(600, "later")  # due in ten minutes of Redis's time

    log = kit.logs / f"worker-{len(kit.workers)}.log"
    env = {**kit.env(), "TEST_CLOCK_AHEAD_S": str(AHEAD)}
    ahead = kit.processes.worker("tests.apps.skewed", "--pool", pool, "-c", "2",
                                 "--name", "ahead", env=env, log=log)
    kit.workers.append(ahead)
    # the honest worker's one slot is busy: these run on the fast one, each leased by a
    # fetch on its own clock (corrected, or not; a process pool's children inherit it)
    quick = [kit.tasks.record.delay(f"quick-{index}") for index in range(QUICK)]
    for index, handle in enumerate(quick):
        assert handle.get(timeout=DEADLINE) == f"quick-{index}"
    ran = kit.marks_of("done", [f"quick-{index}" for index in range(QUICK)])
    pids = {mark.pid for marks in ran.values() for mark in marks}
    assert pids and honest.pid not in pids
    assert not kit.marks("done", "held"), (
        "the held task ended before the fast worker served: the machine is too slow for "
        "this test to see anything")

    # still running on the honest worker, once delivered, its lease its worker's
    assert len(kit.marks("started", "held")) == 1
    assert int(kit.client.hget(QUEUE.deliveries, held.id) or 0) == 1
    assert kit.client.zscore(QUEUE.leases, held.id) is not None
    assert held.get(timeout=DEADLINE) == "held"
    wait_until(lambda: kit.marks("done", "held"), timeout=DEADLINE,
               message="the held task's done marker")
    marks = kit.marks("started", "held") + kit.marks("done", "held")
    assert [(mark.pid, mark.delivery) for mark in marks] == [(honest.pid, 1)] * 2, (
        "the held task ran more than once")

    assert later.status() == "scheduled", "the fast worker started a delayed task early"
    assert not kit.marks("done", "later")
    assert ahead.poll() is None and honest.poll() is None


def test_the_task_of_a_worker_an_hour_behind_is_taken_by_no_healthy_one(kit: Kit) -> None:
    """Its lease deadlines, written on its own clock, were an hour past on Redis's: a
    healthy worker took back its running task at once."""
    log = kit.logs / f"worker-{len(kit.workers)}.log"
    env = {**kit.env(), "TEST_CLOCK_AHEAD_S": str(-AHEAD)}
    behind = kit.processes.worker("tests.apps.skewed", "--pool", "thread", "-c", "1",
                                  "--name", "behind", env=env, log=log)
    kit.workers.append(behind)
    held = kit.tasks.slow.delay("held", HELD)
    assert kit.wait_for_marks("started", "held")[0].pid == behind.pid
    honest = kit.worker("--pool", "thread", "-c", "2", "--name", "honest")
    quick = [kit.tasks.record.delay(f"quick-{index}") for index in range(QUICK)]
    for index, handle in enumerate(quick):
        assert handle.get(timeout=DEADLINE) == f"quick-{index}"
    ran = kit.marks_of("done", [f"quick-{index}" for index in range(QUICK)])
    assert {mark.pid for marks in ran.values() for mark in marks} == {honest.pid}
    assert not kit.marks("done", "held"), "the machine is too slow for this test"

    assert len(kit.marks("started", "held")) == 1
    assert held.get(timeout=DEADLINE) == "held"
    wait_until(lambda: kit.marks("done", "held"), timeout=DEADLINE,
               message="the held task's done marker")
    marks = kit.marks("started", "held") + kit.marks("done", "held")
    assert [(mark.pid, mark.delivery) for mark in marks] == [(behind.pid, 1)] * 2
