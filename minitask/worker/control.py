"""Orders from afar: ``minitask shutdown`` stops a worker as SIGTERM would.

Each worker (the supervisor, in a process pool) has a list in Redis that a
thread of its own waits on with a blocking BLPOP: an order is acted on the
moment it is pushed, and an idle listener costs one call per ``WAIT`` seconds,
not a poll. A thread of its own, not the worker's wait for tasks: a worker
busy with a long task is not waiting for tasks, and must still hear it.
"""
from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import replace
from typing import Any, Callable, List, Optional

from ..broker.durability import caught_up
from ..errors import BrokerError
from ..log_throttle import LogThrottle
from ..printable import own_logger, shown_value
from ..stores.registry import SHUTDOWN, WAKE, WorkerRegistry
from ..wire.message import to_ms
from .outages import Backoff
from .unconfirmed import WRITES

logger = own_logger(__name__)

#: Seconds one BLPOP of the listener blocks at most (a vanished Redis is noticed).
WAIT = 5.0
#: Seconds a stopping worker waits for its listener to end after waking it.
JOIN_TIMEOUT = 2.0
#: Orders the listener takes in one read at most: a list filled with orders no
#: minitask wrote is read a bounded batch at a time.
ORDERS_READ = 100
#: Seconds between two log lines about unknown orders at most: each line counts
#: those ignored since the last and shows one of them (50,000 planted orders made
#: 50,000 lines).
UNKNOWN_SAID_EVERY = 60.0
#: Characters of an unknown order a line shows at most; a longer one (a 100 MB element
#: planted on the list: read once, by the pop that takes it off) is said by its length.
ORDER_SHOWN_MOST = 64


class Orders:
    """Listens for orders to one worker; ``on_shutdown`` asks it to stop."""

    def __init__(self, registry: WorkerRegistry, worker: str,
                 on_shutdown: Callable[[str], None]) -> None:
        self._registry = registry
        self._worker = worker
        self._on_shutdown = on_shutdown
        self._ended = threading.Event()
        self._thread: Optional[threading.Thread] = None
        #: unknown orders ignored since the last line said so, and one of them
        self._unknown = LogThrottle(UNKNOWN_SAID_EVERY)
        self._sample = ""

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
        backoff = Backoff("listen for minitask shutdown orders")
        try:
            while not self._ended.is_set():
                try:
                    orders = self._registry.next_orders(self._worker, WAIT, ORDERS_READ)
                except BrokerError as exc:
                    if self._ended.is_set():
                        return
                    self._ended.wait(backoff.failed(exc))
                    continue
                backoff.succeeded()
                if SHUTDOWN in orders and not self._ended.is_set():
                    self._ended.set()
                    self._on_shutdown("minitask shutdown")
                self._ignore([order for order in orders if order not in (SHUTDOWN, WAKE)])
        finally:
            backoff.gave_up()  # it no longer rides an outage
            self._say_unknown(self._unknown.forget())

    def _ignore(self, unknown: List[str]) -> None:
        """Count orders no minitask sends; say so at most once per UNKNOWN_SAID_EVERY."""
        if not unknown:
            return
        if not self._sample:
            self._sample = (shown_value(unknown[0]) if len(unknown[0]) <= ORDER_SHOWN_MOST
                            else f"of {len(unknown[0]):,} characters (not shown)")
        self._say_unknown(self._unknown.note(None, len(unknown)))

    def _say_unknown(self, count: int) -> None:
        if count:
            logger.warning("worker %s ignores the unknown order %s%s, taken off %s",
                           self._worker, self._sample, "" if count == 1 else
                           f" and {count - 1} more (said at most once a minute)",
                           self._registry.app_keys.control(self._worker))
            self._sample = ""


#: The longest a heartbeat waits for replicas to confirm they caught up (s): one still
#: behind holds the heartbeat no longer (the app's durability_timeout may be long).
REFRESH_WAIT = 0.1


def refreshed(worker: Any) -> None:
    """While an outage of unconfirmed writes goes on: ask the replicas of ``worker``'s
    queues (a touch and a WAIT of ``REFRESH_WAIT`` at most) whether they have every
    write now, and end the outage if they do (``UnconfirmedWrites.refresh``)."""
    if not WRITES.pending:
        return
    transport, queues = worker.broker.transport, worker.broker.queues
    policy = transport.durability
    if policy.timeout > REFRESH_WAIT:
        policy = replace(policy, timeout=REFRESH_WAIT)
    WRITES.refresh(lambda: caught_up(transport.client, policy,
                                     [queues.keys(queue).base for queue in worker.queues]))


def register(worker: Any, now_ms: int, running: int, started: List[str],
             stalled: str = "{}") -> None:
    """Say ``worker`` (a ``Worker``) is alive, with its counters and the ids of the
    tasks it runs, at most ``concurrency``: a pool's supervisor, not its children,
    says theirs (``running_ids``, read from their shared memory), and the queues
    whose fetch Redis refuses (``stalled``: ``QueueRefusals.stalled``). They are as
    fresh as the last heartbeat; they cost no command (a field of the heartbeat's HSET)."""
    if worker.running_ids is not None:
        running, started = len(worker.running_ids), worker.running_ids
    refreshed(worker)  # the count of unconfirmed writes as replicas see them now
    worker.broker.registry.heartbeat(worker.id, {
        "name": worker.name, "pid": os.getpid(), "host": socket.gethostname(),
        "queues": ",".join(worker.queues), "pool": worker.pool,
        "concurrency": worker.concurrency, "started_ms": worker.started_ms,
        "processed": worker.processed, "failed": worker.failed, "running": running,
        "recycled": worker.recycled, "beat_ms": now_ms, "running_ids": json.dumps(started),
        "stalled": stalled, **WRITES.heartbeat(now_ms),
        # the asyncio pool's coroutines left running past their cancel (a time limit)
        "overrun": 0 if worker.overruns is None else worker.overruns.count,
        **({} if worker.clock_skew_ms is None else {"clock_skew_ms": worker.clock_skew_ms}),
    }, now_ms, ttl_ms=to_ms(worker.heartbeat_period) * 4)
