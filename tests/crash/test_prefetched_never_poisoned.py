"""Poison is contained, and only the poison (guarantees.rst "Poison is contained").

A process pool child leases ``--prefetch`` tasks at once, and each lease counts a
delivery. When the task it runs kills it, the tasks it had prefetched and not
started were left to their leases, to expire with the poison's: the same batch
came back together, each delivery counted again, until the innocent tasks reached
max_deliveries with the poison and were dead-lettered as "the worker died while
running it" though they never ran (probe36 F2). The supervisor now gives them back
at once, their delivery uncounted: the poison alone goes to the dead letters, and
every other task runs and succeeds.
"""
from __future__ import annotations

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

MAX_DELIVERIES = 3


def test_tasks_prefetched_with_a_poison_are_not_dead_lettered_with_it(kit: Kit) -> None:
    poison = kit.tasks.poison.delay("poison")  # first: the child runs it first
    keys = [f"rec-{i}" for i in range(6)]
    handles = {key: kit.tasks.record.delay(key) for key in keys}
    kit.worker("--pool", "process", "-c", "1", "--prefetch", "10",
               max_deliveries=MAX_DELIVERIES)

    app = kit.tasks.app
    wait_until(lambda: poison.id in {d.task_id for d in app.dead_letters()},
               timeout=DEADLINE, message="the poison task to be dead")
    wait_until(lambda: all(kit.mark_counts("done", keys).values()) or
               len(app.dead_letters()) > 1, timeout=DEADLINE,
               message="the other tasks to be done (or dead)")

    dead = app.dead_letters()
    assert [d.task_id for d in dead] == [poison.id], (
        f"only the poison is dead-lettered, not tasks prefetched with it: {dead}")
    assert len(kit.marks("started", "poison")) == MAX_DELIVERIES
    kit.wait_until_drained()
    for key in keys:
        assert handles[key].status() == "succeeded", key
        assert len(kit.marks("done", key)) == 1, f"{key} ran once: {kit.marks('done', key)}"
