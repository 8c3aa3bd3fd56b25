"""At least once and zero loss through SIGKILL; no duplicate while alive; poison contained.

Note on attempts: a re-delivery after a crash carries the same message, so
``current_task().attempt`` stays what it was (attempts count failed attempts
that ended with an outcome); hand-overs are counted apart, in ``deliveries``.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

from minitask import TaskFailed
from tests.support.crash_kit import DEADLINE, QUEUE, VISIBILITY, Kit
from tests.support.marks import Mark
from tests.support.processes import kill_group
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

POOLS: Dict[str, Tuple[str, ...]] = {
    "process": ("--pool", "process", "-c", "4"),
    "thread": ("--pool", "thread", "-c", "20"),
}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_sigkill_mid_task_loses_nothing_and_redelivers_the_running_tasks(
        kit: Kit, pool: str) -> None:
    keys = [f"kill-{i}" for i in range(20)]
    handles = {key: kit.tasks.slow.delay(key, 1.5) for key in keys}
    first = kit.worker(*POOLS[pool])
    wait_until(lambda: sum(kit.mark_counts("started", keys).values()) >= 3, timeout=DEADLINE,
               message="several tasks to start")
    kill_group(first)

    started_before = kit.marks_of("started", keys)
    done_before = kit.marks_of("done", keys)
    interrupted = [k for k in keys if started_before[k] and not done_before[k]]
    assert interrupted, "the kill was meant to land while tasks ran"
    assert kit.queue_state()["leases"] > 0, "the killed worker held leases"

    kit.worker(*POOLS[pool])
    wait_until(lambda: all(kit.mark_counts("done", keys).values()), timeout=DEADLINE,
               message="every task to be done")
    kit.wait_until_drained()

    started = kit.marks_of("started", keys)
    done = kit.marks_of("done", keys)
    for key in keys:
        task_id = handles[key].id
        assert [m.task_id for m in done[key]] == [task_id], f"{key}: done {done[key]}"
        assert [m.attempt for m in started[key] + done[key]] == [1] * (len(started[key]) + 1), (
            f"{key}: a re-delivery after a crash keeps the attempt number: "
            f"{started[key]} {done[key]}")
        if key in interrupted:
            old_pids = {m.pid for m in started_before[key]}
            assert len(started[key]) == 2, f"{key} ran again once: {started[key]}"
            assert [m.delivery for m in started[key]] == [1, 2], (
                f"{key}: the second run knows it is a re-delivery: {started[key]}")
            assert done[key][0].pid not in old_pids, f"{key} finished by the new worker"
        else:
            assert len(started[key]) == 1, f"{key} started once: {started[key]}"
        assert handles[key].status() == "succeeded"
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", ["process", "thread"])
def test_task_longer_than_visibility_timeout_runs_once_while_its_worker_lives(
        kit: Kit, pool: str) -> None:
    kit.worker("--pool", pool, "-c", "2")
    kit.worker("--pool", pool, "-c", "2")
    handle = kit.tasks.slow.delay("long", 3 * VISIBILITY)

    kit.wait_for_marks("done", "long")
    kit.wait_until_drained()

    started, done = kit.marks("started", "long"), kit.marks("done", "long")
    assert len(started) == 1, f"started more than once while its worker lived: {started}"
    assert len(done) == 1, done
    assert started[0].pid == done[0].pid
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


def test_poison_task_is_dead_lettered_after_max_deliveries_and_others_complete(
        kit: Kit) -> None:
    worker = kit.worker("--pool", "process", "-c", "2", max_deliveries=3)
    poison = kit.tasks.poison.delay("poison")
    others = ([f"rec-{i}" for i in range(10)], [f"slow-{i}" for i in range(2)])
    for key in others[0]:
        kit.tasks.record.delay(key)
    for key in others[1]:
        kit.tasks.slow.delay(key, 0.5)
    every_other = others[0] + others[1]

    app = kit.tasks.app
    wait_until(app.dead_letters, timeout=DEADLINE, message="the poison task to be dead")
    wait_until(lambda: all(kit.mark_counts("done", every_other).values()), timeout=DEADLINE,
               message="the other tasks to be done")
    kit.wait_until_drained()

    started: List[Mark] = kit.marks("started", "poison")
    assert len(started) == 3, f"delivered max_deliveries=3 times, no more: {started}"
    assert len({m.pid for m in started}) == 3, "each delivery killed its child process"
    assert all(m.task_id == poison.id for m in started)
    assert kit.marks("done", "poison") == []

    dead = app.dead_letters()
    assert len(dead) == 1, dead
    letter = dead[0]
    assert (letter.task_id, letter.name, letter.args) == (poison.id, kit.tasks.poison.name,
                                                          ["poison"])
    assert letter.exc_type == "WorkerLost", letter
    assert letter.reason == "worker lost", letter
    assert "3" in letter.message, letter
    assert poison.status() == "failed"
    with pytest.raises(TaskFailed) as failure:
        poison.get(timeout=10)
    assert failure.value.exc_type == "WorkerLost"

    assert all(len(m) == 1 for m in kit.marks_of("done", every_other).values())
    assert worker.poll() is None, "the supervisor replaces children and lives on"
    state = kit.queue_state()
    assert state == {"ready": 0, "leases": 0, "delayed": 0, "dead": 1, "messages": 1,
                     "deliveries": 0, "retrying": 0, "dead_info": 1}, state
    assert kit.client.hkeys(QUEUE.messages) == [poison.id.encode()], "kept for inspection"


@pytest.mark.parametrize("pool", ["process", "thread", "asyncio"])
def test_sigkill_with_prefetch_loses_none_of_the_tasks_leased_ahead(kit: Kit, pool: str) -> None:
    """Tasks a worker leased ahead come back after their lease expires; only a task whose
    outcome was waiting (at most ACK_WINDOW) to be batched may run a second time."""
    keys = [f"ahead-{i}" for i in range(12)]
    handles = {key: kit.tasks.slow.delay(key, 0.5) for key in keys}
    first = kit.worker("--pool", pool, "-c", "2", "--prefetch", "5")
    wait_until(lambda: sum(kit.mark_counts("started", keys).values()) >= 3, timeout=DEADLINE,
               message="several tasks to start")
    kill_group(first)
    assert kit.queue_state()["leases"] > 2, "the killed worker held tasks leased ahead"
    done_before = kit.marks_of("done", keys)

    kit.worker("--pool", pool, "-c", "2", "--prefetch", "5")
    wait_until(lambda: all(kit.mark_counts("done", keys).values()), timeout=DEADLINE,
               message="every task to be done")
    kit.wait_until_drained()

    done = kit.marks_of("done", keys)
    for key in keys:
        assert handles[key].status() == "succeeded"
        again = done[key][len(done_before[key]):]
        assert len(again) <= 1, f"{key} ran again at most once, after the kill: {done[key]}"
        assert done_before[key] or len(again) == 1, f"{key} was not lost: {done[key]}"
    kit.assert_nothing_left()
