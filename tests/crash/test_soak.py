"""Soak: thousands of tasks across several workers, some SIGKILLed mid-run and restarted.
Every task completes at least once; duplicates are counted and shown, never lost tasks."""
from __future__ import annotations

import time
from typing import List

import pytest

from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.processes import kill_group
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

TASKS = 3000
WORKERS = 3
WORKER_ARGS = ("--pool", "process", "-c", "2")
#: Kill a worker once this many tasks are finished (one kill per entry).
KILL_AT = (TASKS // 4, TASKS // 2)


def test_thousands_of_tasks_survive_worker_kills_without_loss(kit: Kit) -> None:
    keys = [f"soak-{i}" for i in range(TASKS)]
    began = time.monotonic()
    handles = kit.tasks.record.delay_many([(key,) for key in keys])
    assert len(handles) == TASKS

    def finished() -> int:
        return TASKS - int(kit.client.hlen(QUEUE.messages))

    workers = [kit.worker(*WORKER_ARGS) for _ in range(WORKERS)]
    kills: List[int] = []
    for victim, threshold in enumerate(KILL_AT):
        wait_until(lambda: finished() >= threshold, timeout=DEADLINE,
                   message=f"{threshold} finished tasks")
        kill_group(workers[victim])
        kills.append(finished())
        assert kills[-1] < TASKS, "the kill was meant to land during the run"
        workers[victim] = kit.worker(*WORKER_ARGS)
    wait_until(lambda: finished() == TASKS, timeout=2 * DEADLINE,
               message=f"all {TASKS} tasks to finish")
    seconds = time.monotonic() - began
    kit.wait_until_drained()

    counts = kit.mark_counts("done", keys)
    lost = [key for key, count in counts.items() if count == 0]
    duplicates = {key: count for key, count in counts.items() if count > 1}
    summary = (f"soak: {TASKS} tasks, {WORKERS} workers {' '.join(WORKER_ARGS)}, "
               f"{len(kills)} SIGKILLs (at {kills} finished), {len(duplicates)} duplicate(s) "
               f"{duplicates}, {len(lost)} lost, {seconds:.1f} s")
    print(f"\n{summary}")
    assert not lost, f"{summary}; lost: {lost[:20]}"
    assert all(w.poll() is None for w in workers), summary
    kit.assert_nothing_left()
