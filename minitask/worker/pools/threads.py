"""The thread pool: a fixed set of threads fed by the worker's dispatcher."""
from __future__ import annotations

import logging
import queue as _queue
import threading
from typing import Callable, Generic, Optional

from .job import J

logger = logging.getLogger(__name__)


class ThreadPool(Generic[J]):
    """A fixed set of threads; the dispatcher takes a slot before it fetches."""

    def __init__(self, size: int, execute: Callable[[J], None]) -> None:
        self._size = size
        self._busy = 0
        self._finished = 0
        self._idle = threading.Condition()
        self._jobs: "_queue.SimpleQueue[J]" = _queue.SimpleQueue()
        self._execute = execute
        for index in range(size):
            threading.Thread(target=self._loop, name=f"minitask-thread-{index}",
                             daemon=True).start()

    def wait_for_slot(self, stop: threading.Event) -> bool:
        """Take a free slot; False when ``stop`` is set first."""
        with self._idle:
            while self._busy >= self._size and not stop.is_set():
                self._idle.wait(0.2)
            if stop.is_set():
                return False
            self._busy += 1
            return True

    def give_back_slot(self, finished: bool = False) -> None:
        with self._idle:
            self._busy -= 1
            self._finished += finished
            self._idle.notify_all()

    @property
    def finished(self) -> int:
        """Jobs run to the end so far: a change means new work may have been scheduled."""
        with self._idle:
            return self._finished

    def submit(self, job: J) -> None:
        self._jobs.put(job)

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Wait until no job runs; False when ``timeout`` seconds pass first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                self._execute(job)
            except BaseException:  # a bug of ours must not end the thread; the lease expires
                logger.exception("internal error while running task %s", job.task_id)
            finally:
                self.give_back_slot(finished=True)
