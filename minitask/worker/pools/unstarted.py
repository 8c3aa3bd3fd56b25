"""The tasks a process pool child leased and has not started, told to its supervisor.

A child that prefetches (``--prefetch`` above 1) leases several tasks at once, and
each lease counts a delivery. Were the child to die (the task it runs killed it),
those it had not started would wait for their leases to expire with the running
one's, and come back with it, counted again: the same batch, each time, until
tasks that never ran reached max_deliveries with a poison and were dead-lettered
as having killed their worker (probe36 F2). So the child tells its supervisor,
in shared memory, which tasks it holds and has not started; once the child is
gone, the supervisor gives them back at once, their delivery uncounted
(``Worker.give_back_unstarted``): only the task that was running keeps its count.

What it holds is written whole when it changes otherwise (a fetch, a give-back: a
cost per fetch), and the number of those taken since, in their order, when a task
is taken (a cost per task that does not grow with the prefetch). Written in that
order (the list, then the number), a child killed between the two has its
supervisor give back fewer, never one that started: those left come back as
their leases expire, as before.
"""
from __future__ import annotations

import ctypes
import json
from typing import Any, Callable, Deque, Dict, List, Optional

from ..leases import Job, Lease, Waiting

#: Bytes of shared memory per task prefetched: its id, its queue and two numbers.
PER_TASK = 320


class Unstarted:
    """The shared memory a child tells the tasks it has not started in."""

    def __init__(self, context: Any, prefetch: int) -> None:
        # (none at prefetch 1: a child then holds no task it has not started)
        self._memory = (context.RawArray(ctypes.c_char, PER_TASK * prefetch + 1)
                        if prefetch > 1 else None)
        self._taken: Any = (context.RawArray(ctypes.c_int64, 1)  # how many of them were taken
                            if prefetch > 1 else None)

    def told(self) -> Optional[Waiting]:
        """In the child: what its holdings tell the tasks not started to
        (``leases.count_holdings``), or None when it prefetches none."""
        memory, shared = self._memory, self._taken
        if memory is None:
            return None
        most = len(memory) - 1  # and a NUL
        listed: List[Job] = []  # as written
        taken = [0]

        def tell(claimed: Dict[int, Job], buffer: Deque[Job], took: Optional[Job]) -> None:
            if took is not None and taken[0] < len(listed) and listed[taken[0]] is took:
                taken[0] += 1
                shared[0] = taken[0]
                return
            jobs = [*claimed.values(), *buffer]
            while True:
                text = json.dumps([(job.task_id, job.queue, job.delivery.priority,
                                    job.delivery.delivery) for job in jobs]).encode()
                if len(text) <= most:
                    break
                # the first kept: those left out come back as their leases expire
                jobs = jobs[:len(jobs) // 2]
            memory.value = text
            shared[0] = taken[0] = 0
            listed[:] = jobs
        return tell

    def give_back(self, give: Callable[[List[Lease], Dict[str, int]], None]) -> int:
        """In the supervisor, once the child is gone: ``give`` the leases of the tasks it
        had not started, with the delivery number each lease got (none when none
        waited); how many. The task it ran is not one: it stays counted."""
        if self._memory is None:
            return 0
        try:
            told = json.loads(self._memory.value or b"[]")[max(0, int(self._taken[0])):]
            held: List[Lease] = [(str(task_id), (str(queue), int(priority)))
                                 for task_id, queue, priority, _ in told]
            deliveries = {str(entry[0]): int(entry[3]) for entry in told}
        except (ValueError, TypeError, IndexError):  # cut short by a kill: they come
            return 0                                  # back as their leases expire
        if held:
            give(held, deliveries)
        return len(held)


__all__: List[str] = ["Unstarted"]
