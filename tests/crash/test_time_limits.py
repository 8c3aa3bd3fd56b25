"""Time limits in the process pool: a runaway attempt is killed, fails with
TimeLimitExceeded, and the worker goes on with other tasks."""
from __future__ import annotations

import signal

import pytest

from minitask import TaskFailed
from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.processes import send
from tests.support.procfs import pid_running
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash


def test_runaway_attempt_is_killed_dead_lettered_and_the_worker_goes_on(kit: Kit) -> None:
    worker = kit.worker("--pool", "process", "-c", "1")
    handle = kit.tasks.runaway.delay("runaway")
    child = kit.wait_for_marks("started", "runaway")[0].pid

    wait_until(lambda: not pid_running(child), timeout=DEADLINE,
               message=f"the runaway child {child} to be killed")
    dead = wait_until(kit.tasks.app.dead_letters, timeout=DEADLINE, message="a dead letter")
    after = kit.tasks.record.delay("after")
    assert after.get(timeout=DEADLINE) == "after", "a replacement child runs the next task"

    assert len(dead) == 1 and dead[0].task_id == handle.id, dead
    assert dead[0].exc_type == "TimeLimitExceeded", dead[0]
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as failure:
        handle.get(timeout=10)
    assert failure.value.exc_type == "TimeLimitExceeded"
    assert len(kit.marks("started", "runaway")) == 1, "failed once, not delivered again"
    assert kit.marks("done", "after")[0].pid != child
    assert worker.poll() is None
    kit.wait_until_drained()
    state = kit.queue_state()
    assert state == {"ready": 0, "leases": 0, "delayed": 0, "dead": 1, "messages": 1,
                     "deliveries": 0, "retrying": 0, "dead_info": 1}, state
    assert kit.client.hkeys(QUEUE.messages) == [handle.id.encode()]


def test_runaway_first_attempt_is_killed_and_the_retry_succeeds(kit: Kit) -> None:
    kit.worker("--pool", "process", "-c", "1")
    handle = kit.tasks.runaway_retried.delay("retried")

    assert handle.get(timeout=DEADLINE) == "second attempt"

    started, done = kit.marks("started", "retried"), kit.marks("done", "retried")
    assert [m.attempt for m in started] == [1, 2], started
    assert started[0].pid != started[1].pid, "the first attempt's process was killed"
    assert not pid_running(started[0].pid)
    assert [(m.attempt, m.pid) for m in done] == [(2, started[1].pid)], done
    assert handle.status() == "succeeded"
    kit.wait_until_drained()
    kit.assert_nothing_left()


def test_prefetched_tasks_are_given_back_before_a_timed_attempt_that_gets_killed(
        kit: Kit) -> None:
    """With prefetch, the tasks waiting behind a timed attempt go back to the queue
    before it starts: its kill costs them neither a lease expiry nor a delivery."""
    keys = [f"behind-{i}" for i in range(3)]
    runaway = kit.tasks.runaway.delay("runaway-first")
    behind = [kit.tasks.record.delay(key) for key in keys]
    kit.worker("--pool", "process", "-c", "1", "--prefetch", "5")

    assert [handle.get(timeout=DEADLINE) for handle in behind] == keys
    done = kit.marks_of("done", keys)
    assert all(len(marks) == 1 and marks[0].delivery == 1 for marks in done.values()), done
    wait_until(lambda: runaway.status() == "failed", timeout=DEADLINE,
               message="the runaway to be dead-lettered")
    kit.wait_until_drained()


def test_burst_pool_replaces_a_child_killed_at_its_time_limit_and_runs_the_rest(
        kit: Kit) -> None:
    runaway = kit.tasks.runaway.delay("runaway-burst")
    after = kit.tasks.record.delay("after-burst")
    worker = kit.worker("--pool", "process", "-c", "1", "--burst")

    assert worker.wait(timeout=DEADLINE) == 0
    assert after.get(timeout=5) == "after-burst", "run by the replacement child"
    assert runaway.status() == "failed"


def test_time_limit_is_enforced_during_the_grace_of_a_stop(kit: Kit) -> None:
    """A runaway attempt cannot use up a long grace: it is killed at its limit and
    recorded as failed, and the worker exits 0 long before the grace ends."""
    worker = kit.worker("--pool", "process", "-c", "1", "--grace", "30")
    handle = kit.tasks.runaway.delay("runaway-grace")
    kit.wait_for_marks("started", "runaway-grace")

    send(worker, signal.SIGTERM)

    assert worker.wait(timeout=15) == 0, "exited at the time limit, not after the grace"
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as failure:
        handle.get(timeout=5)
    assert failure.value.exc_type == "TimeLimitExceeded"
