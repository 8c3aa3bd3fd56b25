"""Orders from afar: ``minitask shutdown`` stops a worker as SIGTERM would.

Each worker (the supervisor, in a process pool) has a list in Redis that a
thread of its own waits on with a blocking BLPOP: an order is acted on the
moment it is pushed, and an idle listener costs one call per ``WAIT`` seconds,
not a poll. A thread of its own, not the worker's wait for tasks: a worker
busy with a long task is not waiting for tasks, and must still hear it.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
from typing import Any, Callable, List, Optional

from ..errors import BrokerError
from ..stores.foreign import foreign
from ..stores.registry import SHUTDOWN, WAKE, WorkerRegistry
from ..wire.message import to_ms
from .outages import Backoff

logger = logging.getLogger(__name__)

#: Seconds one BLPOP of the listener blocks at most (a vanished Redis is noticed).
WAIT = 5.0
#: Seconds a stopping worker waits for its listener to end after waking it.
JOIN_TIMEOUT = 2.0


class Orders:
    """Listens for orders to one worker; ``on_shutdown`` asks it to stop."""

    def __init__(self, registry: WorkerRegistry, worker: str,
                 on_shutdown: Callable[[str], None]) -> None:
        self._registry = registry
        self._worker = worker
        self._on_shutdown = on_shutdown
        self._ended = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="minitask-orders", daemon=True)
        self._thread.start()

    def end(self) -> None:
        """Stop listening: a push to its own list ends the listener's BLPOP at once,
        and it is waited for (briefly), so that closing the app's connections next
        cannot cut a reply in half under it."""
        if self._thread is None:
            return
        self._ended.set()
        try:
            self._registry.send_order(self._worker, WAKE)
        except BrokerError as exc:
            # Redis is gone: the listener ends with its own failed call, in the background
            logger.debug("could not wake the orders listener of %s: %s", self._worker, exc)
            return
        self._thread.join(timeout=JOIN_TIMEOUT)

    def _loop(self) -> None:
        backoff = Backoff("listen for orders (minitask shutdown)")
        try:
            while not self._ended.is_set():
                try:
                    order = self._registry.next_order(self._worker, WAIT)
                except BrokerError as exc:
                    if self._ended.is_set():
                        return
                    if foreign(exc):  # its list holds another type: data, said once by
                        self._ended.wait(WAIT)  # the registry naming it, not an outage
                        continue
                    self._ended.wait(backoff.failed(exc))
                    continue
                backoff.succeeded()
                if order == SHUTDOWN and not self._ended.is_set():
                    self._ended.set()
                    self._on_shutdown("minitask shutdown")
                elif order not in (None, WAKE):
                    logger.warning("worker %s ignores the unknown order %r", self._worker, order)
        finally:
            backoff.gave_up()  # it no longer rides an outage


def register(worker: Any, now_ms: int, running: int, started: List[str]) -> None:
    """Say ``worker`` (a ``Worker``) is alive, with its counters and the ids of the
    tasks it runs, at most ``concurrency``: a pool's supervisor, not its children,
    says theirs (``running_ids``, read from their shared memory). They are as fresh
    as the last heartbeat; they cost no command (a field of the heartbeat's HSET)."""
    if worker.running_ids is not None:
        running, started = len(worker.running_ids), worker.running_ids
    worker.broker.registry.heartbeat(worker.id, {
        "name": worker.name, "pid": os.getpid(), "host": socket.gethostname(),
        "queues": ",".join(worker.queues), "pool": worker.pool,
        "concurrency": worker.concurrency, "started_ms": worker.started_ms,
        "processed": worker.processed, "failed": worker.failed, "running": running,
        "recycled": worker.recycled, "beat_ms": now_ms, "running_ids": json.dumps(started),
        **({} if worker.clock_skew_ms is None else {"clock_skew_ms": worker.clock_skew_ms}),
    }, now_ms, ttl_ms=to_ms(worker.heartbeat_period) * 4)
