"""The thread pool: a fixed set of threads fed by the worker's dispatcher.

A thread that ends a job asks ``follow_on`` for its next one before it gives its
slot back: the worker records the outcome with the next fetch in one round trip,
and the thread runs what it leased, with no hop through the dispatcher. The slot
goes back (and the dispatcher takes over) only once no work came.
"""
from __future__ import annotations

import logging
import queue as _queue
import threading
from typing import Callable, Generic, List, Optional

from ...printable import log_error, own_logger
from ..forks import FORK_MARK, PID_SEEN, current_pid, leave_if_forked
from .job import J
from .slots import FixedSlots

logger = own_logger(__name__)


class ThreadPool(FixedSlots, Generic[J]):
    """A fixed set of threads; the dispatcher takes a slot before it fetches, and a
    thread keeps it while ``follow_on`` hands it more work.

    Each thread first runs ``init`` (the ``worker_process_init`` hooks), which
    returns why it failed or None; the pool is built once every thread has. A
    thread whose set-up failed takes no work: the pool has a slot fewer, and
    ``init_failures`` says why.
    """

    def __init__(self, size: int, execute: Callable[[J], None],
                 init: Callable[[], Optional[str]] = lambda: None,
                 follow_on: Callable[[], Optional[J]] = lambda: None) -> None:
        super().__init__(size)
        self._jobs: "_queue.SimpleQueue[J]" = _queue.SimpleQueue()
        self._execute = execute
        self._follow_on = follow_on
        self._init = init
        started: "_queue.SimpleQueue[Optional[str]]" = _queue.SimpleQueue()
        for index in range(size):
            threading.Thread(target=self._loop, args=(started,),
                             name=f"minitask-thread-{index}", daemon=True).start()
        self.init_failures: List[str] = []
        for _ in range(size):
            failed = started.get()
            if failed is not None:
                self.init_failures.append(failed)
        if self.init_failures:
            self._size -= len(self.init_failures)
            logger.error("%d of %d thread(s) take no work: %s", len(self.init_failures),
                         size, self.init_failures[-1])

    def submit(self, job: J) -> None:
        self._jobs.put(job)

    def _loop(self, started: "_queue.SimpleQueue[Optional[str]]") -> None:
        failed: Optional[str] = "its set-up ended the thread"
        try:
            failed = self._init()
        finally:  # even a SystemExit from a hook must not leave the pool waiting
            started.put(failed)
        if failed is not None:
            return
        pid = current_pid()
        while True:
            job: Optional[J] = self._jobs.get()
            try:
                while job is not None:
                    try:
                        self._execute(job)
                    except BaseException as exc:
                        # a bug of ours must not end the thread; the lease expires
                        log_error(logger, logging.ERROR, "internal error while running task "
                                  "%s", job.task_id, error=exc)
                    if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
                        leave_if_forked(pid)  # a copy a hook forked: never a worker's thread
                    self.ran_one()
                    job = None  # (should follow_on raise)
                    job = self._follow_on()
            except BaseException as exc:  # the same; the dispatcher fetches instead
                log_error(logger, logging.ERROR, "internal error while fetching the next task",
                          error=exc)
            finally:
                self.give_back_slot()
