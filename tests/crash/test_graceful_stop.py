"""Graceful stop: SIGTERM / SIGINT let running tasks finish within the grace, give back
the rest uncounted, exit 0; a second SIGINT exits at once and recovery is a crash's."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support.crash_kit import DEADLINE, QUEUE, VISIBILITY, Kit
from tests.support.processes import exit_code, send
from tests.support.procfs import descendants
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

POOLS = ["process", "thread"]


@pytest.mark.parametrize("target", ["main", "group"])
@pytest.mark.parametrize("pool", POOLS)
def test_sigterm_lets_the_running_task_finish_and_exits_0(
        kit: Kit, pool: str, target: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "2")
    handle = kit.tasks.slow.delay("term", 1.0)
    kit.wait_for_marks("started", "term")

    send(worker, signal.SIGTERM, group=target == "group")

    assert exit_code(worker) == 0
    assert len(kit.marks("done", "term")) == 1, "finished before the worker exited"
    assert len(kit.marks("started", "term")) == 1
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", POOLS)
def test_task_running_through_the_grace_is_not_delivered_again_to_a_live_worker(
        kit: Kit, pool: str) -> None:
    """The stopping worker is alive during its grace: it must keep renewing the lease of
    the task it lets finish, or another worker starts it a second time."""
    stopping = kit.worker("--pool", pool, "-c", "1")
    handle = kit.tasks.slow.delay("grace", 3 * VISIBILITY)
    kit.wait_for_marks("started", "grace")
    kit.worker("--pool", pool, "-c", "1")  # idle, ready to take over what is lost
    wait_until(lambda: kit.live_workers() == 2, timeout=DEADLINE, message="two live workers")

    send(stopping, signal.SIGTERM)

    assert exit_code(stopping) == 0
    kit.wait_until_drained()
    started, done = kit.marks("started", "grace"), kit.marks("done", "grace")
    assert len(started) == 1, (
        f"started twice: its lease lapsed during the grace of a live worker: {started}")
    assert len(done) == 1, done
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", POOLS)
def test_sigterm_after_a_short_grace_gives_the_task_back_uncounted(kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "1", "--grace", "0.3")
    handle = kit.tasks.slow.delay("back", 4.0)
    kit.wait_for_marks("started", "back")

    send(worker, signal.SIGTERM)

    assert exit_code(worker) == 0
    assert kit.marks("done", "back") == [], "the grace was shorter than the task"
    assert kit.is_ready(handle.id), "given back to the queue"
    assert kit.client.hget(QUEUE.deliveries, handle.id) is None, "not counted as a delivery"
    state = kit.queue_state()
    assert (state["ready"], state["leases"], state["messages"]) == (1, 0, 1), state
    assert handle.status() == "queued"

    kit.worker("--pool", pool, "-c", "1")
    kit.wait_for_marks("done", "back")
    kit.wait_until_drained()
    started, done = kit.marks("started", "back"), kit.marks("done", "back")
    assert len(started) == 2 and len(done) == 1, (started, done)
    assert [m.attempt for m in started + done] == [1, 1, 1], "a give-back is no failed attempt"
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", POOLS)
def test_second_sigint_exits_at_once_and_the_task_is_recovered_as_after_a_crash(
        kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "1")  # default grace: 30 s
    handle = kit.tasks.slow.delay("twice", 5.0)
    kit.wait_for_marks("started", "twice")

    # Ctrl-C twice in a terminal: SIGINT to the whole process group. The second one is
    # repeated until the process is gone, in case the first two arrive as one.
    send(worker, signal.SIGINT, group=True)
    deadline = time.monotonic() + 4.0
    while worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.3)
        if worker.poll() is None:
            send(worker, signal.SIGINT, group=True)
    code = worker.poll()
    assert code is not None, "a second SIGINT exits at once, without the grace"
    assert kit.marks("done", "twice") == [], "it did not wait for the task"
    assert handle.status() == "running", "still leased: recovered like after a crash"

    kit.worker("--pool", pool, "-c", "1")
    kit.wait_for_marks("done", "twice")
    kit.wait_until_drained()
    started, done = kit.marks("started", "twice"), kit.marks("done", "twice")
    assert len(started) == 2 and len(done) == 1, (started, done)
    assert done[0].pid != started[0].pid
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


def test_sigterm_with_prefetch_gives_back_the_buffered_tasks_uncounted(kit: Kit) -> None:
    """Tasks a child leased ahead but had not started go back to the head of the queue
    at once, uncounted; the running one finishes within the grace."""
    running = kit.tasks.slow.delay("running", 1.5)
    waiting = [kit.tasks.record.delay(f"waiting-{i}") for i in range(3)]
    worker = kit.worker("--pool", "process", "-c", "1", "--prefetch", "5")
    kit.wait_for_marks("started", "running")
    assert kit.queue_state()["leases"] == 4, "the child leased the waiting tasks too"

    send(worker, signal.SIGTERM)

    assert exit_code(worker) == 0
    assert running.status() == "succeeded"
    assert all(handle.status() == "queued" for handle in waiting)
    assert all(kit.is_ready(handle.id) for handle in waiting), "given back to the queue"
    assert kit.client.hlen(QUEUE.deliveries) == 0, "not counted as deliveries"
    assert all(kit.marks("done", f"waiting-{i}") == [] for i in range(3)), "none started"

    kit.worker("--pool", "process", "-c", "1")
    assert [h.get(timeout=DEADLINE) for h in waiting] == [f"waiting-{i}" for i in range(3)]
    assert all(marks[0].delivery == 1
               for marks in kit.marks_of("done", [f"waiting-{i}" for i in range(3)]).values())
    kit.wait_until_drained()
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", POOLS)
def test_sigterm_racing_a_wake_up_leaves_no_task_leased(kit: Kit, pool: str) -> None:
    """An idle worker's wait has a fetch sent behind its BLPOP. A stop that comes as a
    task arrives must end with that task run or back in its queue, never leased to a
    worker that is gone; and the stop must not wait out the BLPOP (5 s)."""
    worker = kit.worker("--pool", pool, "-c", "2", "--prefetch", "3")
    # its wait for tasks, beside the listener for orders (minitask shutdown); not a
    # count of all blocked clients: the cancel watch's XREAD blocks too, and may be the
    # second while the wait for tasks is not sent yet (the task then is never leased)
    wait_until(lambda: kit.blocked_in("blpop") >= 2,
               timeout=DEADLINE, message="an idle worker")
    handles = kit.tasks.record.delay_many([(f"race-{i}",) for i in range(3)])

    stopped = time.monotonic()
    send(worker, signal.SIGTERM, group=True)
    assert exit_code(worker) == 0
    assert time.monotonic() - stopped < 4.0, "the stop waited for the BLPOP to time out"

    state = kit.queue_state()
    assert state["leases"] == 0, f"leased to a worker that is gone: {state}"
    assert all(h.status() == "succeeded" or kit.is_ready(h.id) for h in handles)
    assert kit.blocked_clients() == 0


@pytest.mark.parametrize("pool", POOLS)
def test_sigterm_reads_and_gives_back_what_the_fetch_behind_the_wait_leased(
        kit: Kit, pool: str) -> None:
    """SIGSTOP holds the waiting process while a task arrives: Redis serves its BLPOP
    and runs the fetch behind it, leasing the task to a process that is then told to
    stop. That reply must still be read and the task given back (or run), never
    left leased to a worker that is gone."""
    worker = kit.worker("--pool", pool, "-c", "1")
    # its wait for tasks, beside the listener for orders (minitask shutdown); not a
    # count of all blocked clients: the cancel watch's XREAD blocks too, and may be the
    # second while the wait for tasks is not sent yet (the task then is never leased)
    wait_until(lambda: kit.blocked_in("blpop") >= 2,
               timeout=DEADLINE, message="an idle worker")
    waiting = descendants(worker.pid) or [worker.pid]  # the pool's child, or the worker
    for pid in waiting:
        os.kill(pid, signal.SIGSTOP)
    try:
        handle = kit.tasks.record.delay("caught")
        wait_until(lambda: kit.queue_state()["leases"] == 1, timeout=DEADLINE,
                   message="the fetch behind the BLPOP to lease the task")
        send(worker, signal.SIGTERM, group=True)
    finally:
        for pid in waiting:
            os.kill(pid, signal.SIGCONT)

    assert exit_code(worker) == 0
    assert kit.queue_state()["leases"] == 0, "leased to a worker that is gone"
    assert handle.status() == "succeeded" or kit.is_ready(handle.id)
    kit.worker("--pool", pool, "-c", "1")
    assert handle.get(timeout=DEADLINE) == "caught"
    assert [mark.delivery for mark in kit.marks("done", "caught")] == [1], (
        "given back uncounted, or run once")
    kit.wait_until_drained()
    kit.assert_nothing_left()
