"""What a worker tells the outside about its attempts: the app's hooks, the
metrics it adds to Redis with its heartbeat, and the progress tasks report.

The runner calls ``started`` and ``ended`` once per attempt; neither does I/O
(but for a task's last progress value): counts wait in memory until ``flush``,
which the heartbeat calls, so metrics cost no round trip per task.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from ..context import Report, TaskContext, entered, running
from ..errors import BrokerError
from ..printable import own_logger
from ..stores.metrics import (DURATION, DURATION_SUM, MINUTE_MS, PICKUP, PICKUP_SUM, TASKS,
                              UNKNOWN_TASK, Delta, bucket_of)
from ..wire.message import Message
from .host import Host
from .progress import ProgressWriter

logger = own_logger(__name__)

#: An outcome status as ``Recorder.finish`` reports it -> the hook event it fires.
_EVENTS = {"succeeded": "task_success", "retrying": "task_retry", "failed": "task_dead"}


class Observer:
    """Hooks, metrics and progress of one worker process."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._delta = Delta()
        self.progress = ProgressWriter(host)
        #: each attempt's progress reporter; and ``ending(message)``: an attempt
        #: returned, its last progress goes to Redis before its outcome does. The
        #: writer's own methods, asked at every attempt (no call of ours around them)
        self.reporter: Callable[[Message], Report] = self.progress.reporter
        self.ending: Callable[[Message], None] = self.progress.ended
        self._failing = False

    def started(self, context: TaskContext, message: Message) -> None:
        """An attempt starts: count how long it waited, call ``task_start`` hooks."""
        now_ms = self._host.clock.now_ms()
        ready_ms, eta_ms = message.enqueued_at_ms, message.eta_ms
        if eta_ms is not None and eta_ms > ready_ms:
            ready_ms = eta_ms
        waited = (now_ms - ready_ms) / 1000.0 if now_ms > ready_ms else 0.0
        bucket, queue = bucket_of(waited), message.queue
        with self._lock:
            delta = self._delta
            delta.counts[PICKUP, queue, bucket] += 1
            delta.sums[PICKUP_SUM, queue] += waited
        hooks = self._host.hooks
        if hooks.added:  # (none: no call a task to find that out)
            hooks.call("task_start", context)

    def prerun(self, context: TaskContext) -> None:
        """Right before the task's function runs, in its thread: ``task_prerun``."""
        hooks = self._host.hooks
        if hooks.added:
            hooks.call("task_prerun", context)

    def postrun(self, context: TaskContext, status: str, value: Any,
                error: Optional[BaseException]) -> None:
        """The attempt's outcome is recorded (``status`` as ``handle.status()`` names it):
        ``task_postrun``, with the task context current again."""
        hooks = self._host.hooks
        if not hooks.added or not hooks.wants("task_postrun"):
            return
        with entered(context):
            hooks.call("task_postrun", context, status, value if error is None else error)

    async def apostrun(self, context: TaskContext, status: str, value: Any,
                       error: Optional[BaseException]) -> None:
        """``postrun`` on the asyncio pool's loop, awaiting ``async def`` hooks."""
        hooks = self._host.hooks
        if not hooks.added or not hooks.wants("task_postrun"):
            return
        with entered(context):
            await hooks.acall("task_postrun", context, status,
                              value if error is None else error)

    def ended(self, context: Optional[TaskContext], message: Message, status: str, value: Any,
              error: Optional[BaseException], duration: float) -> None:
        """An attempt's outcome is recorded (``status`` as ``Recorder.finish`` says it):
        count it and call the hooks."""
        outcome = "succeeded" if status == "succeeded" else (
            "retried" if status == "retrying" else "dead")
        minute = self._host.clock.now_ms() // MINUTE_MS
        queue, task = message.queue, message.task
        bucket = bucket_of(duration)
        with self._lock:
            delta = self._delta
            counts = delta.counts
            counts[TASKS, queue, task, outcome] += 1
            if error is not None:
                counts[TASKS, queue, task, "failed"] += 1
            counts[DURATION, task, bucket] += 1
            delta.sums[DURATION_SUM, task] += duration
            delta.minutes[minute, queue] += 1
        hooks = self._host.hooks
        if context is None or not hooks.added:
            return
        if status == "succeeded":
            hooks.call("task_success", context, value)
            return
        if error is not None:
            hooks.call("task_failure", context, error)
        hooks.call(_EVENTS.get(status, "task_dead"), context, error)

    def buried(self, message: Message, error: BaseException) -> None:
        """The task was dead-lettered with no attempt ended (it killed its workers, no
        task has its name here, or its arguments do not bind): dead all the same,
        counted, ``task_dead`` heard."""
        # the name of a task not registered here is the message's own text: one label
        # for all of them, so that planted messages cannot add series without end
        task = message.task if message.task in self._host.tasks else UNKNOWN_TASK
        with self._lock:
            self._delta.counts[TASKS, message.queue, task, "dead"] += 1
        if self._host.hooks:
            with running(message, self._host.max_deliveries) as context:
                self._host.hooks.call("task_dead", context, error)

    def flush(self) -> None:
        """Add what was counted to the app's metrics in Redis (the heartbeat calls it).

        Raises:
            BrokerError: Redis failed; the counts are kept for the next flush.
        """
        with self._lock:
            delta, self._delta = self._delta, Delta()
        if not delta:
            return
        try:
            self._host.broker.metrics.add(delta)
        except BrokerError:
            with self._lock:
                delta.merge(self._delta)
                self._delta = delta
            raise

    def flush_quietly(self) -> None:
        """Flush; a failure is logged (at WARNING once until a flush succeeds again),
        not raised: metrics never stand in the way of leases or outcomes."""
        try:
            self.flush()
        except BrokerError as exc:
            log = logger.debug if self._failing else logger.warning
            self._failing = True
            log("could not add this worker's metrics to Redis (kept for the next "
                "heartbeat): %s", exc)
        else:
            self._failing = False
