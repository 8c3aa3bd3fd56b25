"""The tasks a process pool child leased and has not started, told to its supervisor.

A child that prefetches (``--prefetch`` above 1) leases several tasks at once, and
each lease counts a delivery. Were the child to die (the task it runs killed it),
those it had not started would wait for their leases to expire with the running
one's, and come back with it, counted again: the same batch, each time, until
tasks that never ran reached max_deliveries with a poison and were dead-lettered
as having killed their worker. So the child tells its supervisor, in shared memory,
which tasks it holds and has not started, each time that changes; once the child
is gone, the supervisor gives them back at once, their delivery uncounted
(``Worker.give_back_unstarted``): only the task that was running keeps its count.
"""
from __future__ import annotations

import ctypes
import json
from typing import Any, Callable, Dict, List, Optional

from ..leases import Job, Lease

#: Bytes of shared memory per task prefetched: its id, its queue and two numbers.
PER_TASK = 320


class Unstarted:
    """The shared memory a child tells the tasks it has not started in."""

    def __init__(self, context: Any, prefetch: int) -> None:
        # (none at prefetch 1: a child then holds no task it has not started)
        self._memory = (context.RawArray(ctypes.c_char, PER_TASK * prefetch + 1)
                        if prefetch > 1 else None)

    def told(self) -> Optional[Callable[[List[Job]], None]]:
        """In the child: what its holdings tell the tasks not started to
        (``leases.count_holdings``), or None when it prefetches none."""
        memory = self._memory
        if memory is None:
            return None
        most = len(memory) - 1  # and a NUL

        def tell(jobs: List[Job]) -> None:
            while True:
                text = json.dumps([(job.task_id, job.queue, job.delivery.priority,
                                    job.delivery.delivery) for job in jobs]).encode()
                if len(text) <= most:
                    break
                # the first kept: those left out come back as their leases expire
                jobs = jobs[:len(jobs) // 2]
            memory.value = text
        return tell

    def give_back(self, give: Callable[[List[Lease], Dict[str, int]], None]) -> int:
        """In the supervisor, once the child is gone: ``give`` the leases of the tasks it
        had not started, with the delivery number each lease got (none when none
        waited); how many. The task it ran is not one: it stays counted."""
        try:
            told = json.loads(self._memory.value or b"[]") if self._memory else []
        except ValueError:  # cut short by a kill: they come back as their leases expire
            told = []
        if told:
            give([(task_id, (queue, int(priority))) for task_id, queue, priority, _ in told],
                 {entry[0]: int(entry[3]) for entry in told})
        return len(told)


__all__: List[str] = ["Unstarted"]
