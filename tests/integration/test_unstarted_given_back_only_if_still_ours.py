"""A dead process pool child's prefetched tasks are given back uncounted, and only
while they are still its own (probe36 F2).

The supervisor gives back, once a child is gone, the tasks it had leased and not
started (``pools/unstarted.py``), through release.lua with the delivery number
each lease got. Release knows no owner: had a lease expired meanwhile and been
taken again (a stalled supervisor, a Redis outage), a plain release would take
that worker's lease away and queue the task again, two runs at once. The
delivery count tells: the new lease counted one more, so the task is left to its
new holder; still the child's, it goes back with its delivery uncounted. And what
the child tells in shared memory names exactly the tasks it had not started:
never the one it took last, which may be the one that killed it.
"""
from __future__ import annotations

import multiprocessing
from collections import deque
from typing import Deque, Dict, List, Tuple

import pytest

from minitask import Minitask
from minitask.stores.queue import Delivery
from minitask.worker.leases import Job, Lease
from minitask.worker.pools.unstarted import Unstarted

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]

LEASE_MS = 60_000


def _fetch(app: Minitask, count: int) -> List[Delivery]:
    now_ms = app.clock.now_ms()
    return list(app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=LEASE_MS,
                                        count=count, max_deliveries=5).deliveries)


def test_a_release_with_a_delivery_number_gives_back_only_a_lease_still_at_it(
        app: Minitask) -> None:
    task = app.task(name="job")(lambda: None)
    handle = task.delay()
    queues = app.broker.queues
    first = _fetch(app, 1)[0]
    assert first.delivery == 1
    # counted once more since: another lease, not the caller's
    assert queues.release("default", [(handle.id, first.priority)], [2]) == 0
    assert queues.counts("default")["running"] == 1, "left to its holder"
    # the caller's own: back at the head, the delivery uncounted
    assert queues.release("default", [(handle.id, first.priority)], [1]) == 1
    again = _fetch(app, 1)[0]
    assert (again.task_id, again.delivery) == (handle.id, 1)


def test_the_child_tells_the_tasks_it_has_not_started_and_never_the_one_it_took() -> None:
    unstarted = Unstarted(multiprocessing.get_context("fork"), 4)
    tell = unstarted.told()
    assert tell is not None
    jobs = [Job("default", Delivery(f"id-{i}", b"", i + 1, 5)) for i in range(4)]
    claimed: Dict[int, Job] = {1: jobs[0]}
    buffer: Deque[Job] = deque(jobs[1:])
    given: List[Tuple[List[Lease], Dict[str, int]]] = []

    def left() -> List[str]:
        given.clear()
        unstarted.give_back(lambda held, deliveries: given.append((held, deliveries)))
        return [task_id for task_id, _ in given[0][0]] if given else []

    tell(claimed, buffer, None)  # a fetch: the first claimed, the rest buffered
    assert left() == ["id-0", "id-1", "id-2", "id-3"]
    assert given[0][1] == {"id-0": 1, "id-1": 2, "id-2": 3, "id-3": 4}
    assert given[0][0][0] == ("id-0", ("default", 5))
    tell(claimed, buffer, claimed.pop(1))  # taken, in order: only a number written
    assert left() == ["id-1", "id-2", "id-3"]
    tell(claimed, buffer, buffer.popleft())
    assert left() == ["id-2", "id-3"]
    buffer.appendleft(jobs[1])  # put back: written whole again
    tell(claimed, buffer, None)
    assert left() == ["id-1", "id-2", "id-3"]
    taken = buffer.pop()  # not the first: written whole again
    tell(claimed, buffer, taken)
    assert left() == ["id-1", "id-2"]
    buffer.clear()
    tell(claimed, buffer, None)
    assert left() == [] and given == []


def test_a_child_that_prefetches_nothing_tells_nothing() -> None:
    unstarted = Unstarted(multiprocessing.get_context("fork"), 1)
    assert unstarted.told() is None
    assert unstarted.give_back(lambda held, deliveries: None) == 0
