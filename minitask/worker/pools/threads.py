"""The thread pool: a fixed set of threads fed by the worker's dispatcher."""
from __future__ import annotations

import logging
import queue as _queue
import threading
from typing import Callable, Generic

from .job import J
from .slots import FixedSlots

logger = logging.getLogger(__name__)


class ThreadPool(FixedSlots, Generic[J]):
    """A fixed set of threads; the dispatcher takes a slot before it fetches."""

    def __init__(self, size: int, execute: Callable[[J], None]) -> None:
        super().__init__(size)
        self._jobs: "_queue.SimpleQueue[J]" = _queue.SimpleQueue()
        self._execute = execute
        for index in range(size):
            threading.Thread(target=self._loop, name=f"minitask-thread-{index}",
                             daemon=True).start()

    def submit(self, job: J) -> None:
        self._jobs.put(job)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                self._execute(job)
            except BaseException:  # a bug of ours must not end the thread; the lease expires
                logger.exception("internal error while running task %s", job.task_id)
            finally:
                self.give_back_slot(finished=True)
