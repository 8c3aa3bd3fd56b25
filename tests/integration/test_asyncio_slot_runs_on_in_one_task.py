"""The asyncio pool runs a slot's jobs one after another in one asyncio task: the job
leased as an outcome is recorded runs on in the task that recorded it, with no task
made and scheduled per job; a cancel on request or a task's own CancelledError in
one job leaves the next ones as they were."""
from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

from minitask import Minitask, TaskContext

pytestmark = [pytest.mark.integration, pytest.mark.app("slottask", on="server")]

TASKS = 30
DEADLINE = 60.0


def test_a_slots_jobs_run_in_one_asyncio_task(app: Minitask) -> None:
    tasks: List[object] = []  # the tasks themselves: an id could be reused
    ran: List[int] = []

    async def prerun(context: TaskContext) -> None:  # awaited in the slot's own task
        tasks.append(asyncio.current_task())

    app.on("task_prerun", prerun)

    @app.task
    async def step(index: int) -> int:
        if index == 5:
            raise asyncio.CancelledError("the task's own")  # its failure, nothing else's
        ran.append(index)
        return index

    handles = step.delay_many([(index,) for index in range(TASKS)])
    worker = app.worker(pool="asyncio", concurrency=1, burst=True)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive(), "the burst worker did not end"

    assert sorted(ran) == [index for index in range(TASKS) if index != 5]
    assert handles[6].get(timeout=DEADLINE) == 6
    assert handles[5].status() == "failed"
    # the queue was full from the start: every job after the first was leased as the
    # one before was recorded, and ran on in the same task (one task per job before)
    assert len(tasks) == TASKS and len({id(task) for task in tasks}) <= 2, \
        f"{len({id(task) for task in tasks})} tasks"
    counts = app.broker.queues.counts("default")
    assert counts["running"] == 0 and counts["ready"] == 0
