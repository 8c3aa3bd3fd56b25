"""TaskHandle: follow one enqueued call by its id."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable, Generic, Optional, TypeVar

from .broker import Broker
from .errors import ConfigurationError, ResultTimeout, TaskFailed
from .serializer import decode_outcome

if TYPE_CHECKING:
    from .aio import AsyncBroker

R = TypeVar("R")

_STATE_TO_STATUS = {"running": "running", "queued": "queued", "scheduled": "scheduled",
                    "retrying": "retrying", "dead": "failed", "unknown": "unknown"}


class TaskHandle(Generic[R]):
    """The id of an enqueued call, with ways to ask what became of it."""

    def __init__(self, broker: Broker, queue: Optional[str], task_id: str,
                 result_ttl_ms: int = 86_400_000,
                 async_broker: "Optional[Callable[[], AsyncBroker]]" = None) -> None:
        self._async_broker = async_broker
        self._results = broker.results
        self._queues = broker.queues
        self._cancels = broker.cancels
        self._queue = queue
        self._result_ttl_ms = result_ttl_ms
        self.id = task_id

    def __repr__(self) -> str:
        return f"<TaskHandle {self.id} queue={self._queue!r}>"

    def _find_queue(self) -> Optional[str]:
        if self._queue is None:
            self._queue = self._results.find_queue(self.id, self._queues.queue_names())
        return self._queue

    def status(self) -> str:
        """Where the task is now.

        Returns:
            One of ``scheduled``, ``queued``, ``running``, ``retrying``,
            ``succeeded``, ``failed``, ``cancelled`` or ``unknown`` (never
            seen, or its result expired).

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = self._find_queue()
        if queue is None:
            return "unknown"
        state, outcome = self._results.state(queue, self.id)
        if state == "finished" and outcome is not None:
            return decode_outcome(outcome).status
        return _STATE_TO_STATUS[state]

    def get(self, timeout: Optional[float] = None) -> R:
        """Wait for the task to finish and return its value.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Returns:
            The task's return value (tuples arrive as lists).

        Raises:
            TaskFailed: the task failed or was cancelled; the remote error is on
                its ``exc_type``, ``message`` and ``traceback``.
            ResultTimeout: ``timeout`` passed first (a ``TimeoutError``).
            BrokerError: Redis could not be reached.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            queue = self._find_queue()
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if queue is not None:
                body = self._results.wait_result(queue, self.id, min(remaining, 5.0)
                                                 if remaining > 0 else 0.002)
                if body is not None:
                    return self._value_of(body)
            elif remaining > 0:
                # the id is in no known queue yet: look again shortly
                time.sleep(min(remaining, 0.05))
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"task {self.id} did not finish within {timeout} s")

    def _value_of(self, body: bytes) -> R:
        outcome = decode_outcome(body)
        if outcome.status == "succeeded":
            return outcome.value  # type: ignore[no-any-return]
        raise TaskFailed(self.id, outcome.exc_type or outcome.status.capitalize(),
                         outcome.message or outcome.reason, outcome.traceback)

    def cancel(self, running: bool = False) -> bool:
        """Withdraw the task if it has not started; with ``running``, also stop it
        if it has.

        A running attempt is stopped within about a second: the process pool
        kills its child (and starts another), the asyncio pool cancels its
        coroutine, the thread pool sets ``current_task().cancel_requested`` for
        the task to check. The task then ends ``cancelled`` (not retried), unless
        it finished first.

        Args:
            running: also stop an attempt that has started.

        Returns:
            True when the task will never run, or (with ``running``) a stop was
            asked of its running attempt; False when it is finished, dead or
            unknown, or running and ``running`` is False.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = self._find_queue()
        if queue is None:
            return False
        if self._results.cancel(queue, self.id, self._result_ttl_ms):
            return True
        return running and self._cancels.request(queue, self.id)

    # -- the same, awaited (redis.asyncio: the event loop is never blocked) ----------

    def _aio(self) -> "AsyncBroker":
        if self._async_broker is None:
            raise ConfigurationError(f"handle {self.id}: made without an app, it has no "
                                     f"async broker; use app.handle(task_id)")
        return self._async_broker()

    async def _afind_queue(self) -> Optional[str]:
        if self._queue is None:
            self._queue = await self._aio().find_queue(self.id)
        return self._queue

    async def astatus(self) -> str:
        """``status()``, awaited.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = await self._afind_queue()
        if queue is None:
            return "unknown"
        state, outcome = await self._aio().state(queue, self.id)
        if state == "finished" and outcome is not None:
            return decode_outcome(outcome).status
        return _STATE_TO_STATUS[state]

    async def aget(self, timeout: Optional[float] = None) -> R:
        """``get()``, awaited: a blocking Redis call on an asyncio connection.

        Raises:
            TaskFailed: the task failed or was cancelled.
            ResultTimeout: ``timeout`` passed first (a ``TimeoutError``).
            BrokerError: Redis could not be reached.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            queue = await self._afind_queue()
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if queue is not None:
                body = await self._aio().wait_result(
                    queue, self.id, min(remaining, 5.0) if remaining > 0 else 0.002)
                if body is not None:
                    return self._value_of(body)
            elif remaining > 0:
                await asyncio.sleep(min(remaining, 0.05))  # in no known queue yet
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"task {self.id} did not finish within {timeout} s")

    async def acancel(self, running: bool = False) -> bool:
        """``cancel()``, awaited.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = await self._afind_queue()
        if queue is None:
            return False
        broker = self._aio()
        if await broker.cancel(queue, self.id, self._result_ttl_ms):
            return True
        return running and await broker.request_cancel(queue, self.id)
