"""What a worker says as it starts (what it serves, and what its pool cannot do) and
as it stops."""
from __future__ import annotations

import inspect
import logging
import sys
from typing import Any, List, Protocol

from ..broker.durability import caught_up
from ..printable import own_logger
from .host import Host
from .unconfirmed import WRITES

logger = own_logger("minitask.worker.loop")  # the lines a worker has always logged


class Worker(Protocol):
    """A worker, as far as its first and last log lines need."""

    name: str
    app: Host
    queues: List[str]
    pool: str
    concurrency: int
    processed: int
    failed: int

    @property
    def broker(self) -> Any: ...


def log_banner(worker: Worker) -> None:
    """The worker's first log lines: what it serves, and what its pool cannot do."""
    tasks = sorted(worker.app.tasks)
    logger.info("minitask worker %s: app %r, broker %s, queues %s, pool %s x%d, %d "
                "task(s): %s", worker.name, worker.app.name, worker.broker.description,
                ",".join(worker.queues), worker.pool, worker.concurrency, len(tasks),
                ", ".join(tasks) or "(none)")
    # an async def task's coroutine is cancelled at its limit; a function cannot be
    plain = [t for t in worker.app.tasks.values() if not inspect.iscoroutinefunction(t.func)]
    if worker.pool == "thread":
        limited = [t.name for t in plain if t.options.timeout is not None]
        if limited:
            logger.warning("the thread pool cannot stop a running function: the timeout of "
                           "%s is checked when the attempt returns (use --pool process to "
                           "kill attempts at their limit)", ", ".join(limited))
    soft = [t.name for t in plain if t.options.soft_timeout is not None]
    if worker.pool != "process" and soft:
        logger.warning("the %s pool runs functions in threads: the soft timeout of %s is "
                       "raised between bytecodes only, not inside a blocking call such as "
                       "time.sleep or a socket read, which it follows (use --pool process "
                       "to interrupt those)", worker.pool, ", ".join(soft))


def log_stopped(worker: Worker, how: str) -> None:
    """The worker's last log line: that it stopped, and what stopped it (after the
    count of its writes replicas left unconfirmed, if an outage of them goes on: those
    replicas have by now are not counted). Called as ``run`` ends: at ERROR when an
    error ends it (``how``: "by BrokerError: ..."), at INFO when a stop or the end of a
    burst does."""
    transport, queues = worker.broker.transport, worker.broker.queues
    WRITES.stopped(lambda: caught_up(transport.client, transport.durability,
                                     [queues.keys(queue).base for queue in worker.queues]))
    raised = sys.exc_info()[1]  # what ``run``'s ``finally`` is letting through, if any
    failed = isinstance(raised, Exception) and how.startswith("by ")
    logger.log(logging.ERROR if failed else logging.INFO,
               "minitask worker %s stopped (%s): %d task(s) processed, %d attempt(s) "
               "failed", worker.name, how, worker.processed, worker.failed)
