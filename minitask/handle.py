"""Handles: follow an enqueued call by its id (a group's handle is in ``groups``)."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, Sequence, Tuple, TypeVar

from .errors import ConfigurationError, DecodeError, ResultTimeout, TaskFailed, task_failed
from .ranout import (agone, atimeout_message, gone, gone_message, step_gone,
                     timeout_message_now, unknown_message)
from .ranout import check_timeout as check_timeout  # the check of every wait
from .stores.aio_clients import cancels_asked, keep_cancel
from .stores.broker import Broker
from .stores.progress import PROGRESS_BYTES, progress_of
from .stores.results import decode_result
from .stores.results import status_of as status_of  # what the readers of statuses import
from .stores.workflow_reads import HANDLE_BYTES, Failure, first_record, frame_of, promised_queue
from .wire.message import Progress, wall_ms
from .wire.serializer import decode_message

if TYPE_CHECKING:
    from .stores.aio import AsyncBroker

R = TypeVar("R")


def check_running(running: Any, where: str) -> None:
    """Refuse a ``cancel(running=...)`` that is not a bool: "yes" (or "no", which is
    true too) would stop a running task nobody meant to stop."""
    if not isinstance(running, bool):
        raise ConfigurationError(f"{where}: running must be True or False, got {running!r}")


#: The statuses of a task that has ended, and will not run again.
_ENDED = frozenset({"succeeded", "failed", "cancelled"})


class TaskHandle(Generic[R]):
    """The id of an enqueued call, with ways to ask what became of it.

    Every enqueue returns one; ``app.handle(task_id)`` rebuilds one from an id.

    Attributes:
        id: the task id (22 url-safe characters, unless you chose it).
    """

    #: Whether the task may be enqueued after the handle exists (a later step of a
    #: workflow): then ``get()`` waits for an id Redis does not know yet.
    _sent_later = False

    def __init__(self, broker: Broker, queue: Optional[str], task_id: str,
                 result_ttl_ms: int = 86_400_000,
                 async_broker: "Optional[Callable[[], AsyncBroker]]" = None) -> None:
        self._broker = broker
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
            self._queue = self._results.find_queue(self.id, self._queues.lookup_names()[0])
        return self._queue

    def status(self) -> str:
        """Where the task is now.

        Returns:
            One of ``scheduled``, ``queued``, ``running``, ``retrying``,
            ``succeeded``, ``failed``, ``cancelled`` or ``unknown`` (never
            seen, or its result expired); ``failed`` for a kept result no minitask
            wrote, or a key its state is read from that holds another type (a list
            where its result should be, say): ``get()`` cannot read it, and says why.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = self._find_queue()
        if queue is None:
            return "unknown"
        return status_of(*self._results.state(queue, self.id))

    def ready(self) -> bool:
        """Whether the task has ended: succeeded, failed or cancelled.

        ``ready()`` is ``successful() or failed()``. It is False while the task
        is queued, scheduled, running or retrying, and False for a task this
        broker does not know (never enqueued here, a chain's step not sent yet,
        or its result expired or forgotten): then there is nothing to read.

        Returns:
            True when ``get()`` would answer without waiting.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return self.status() in _ENDED

    def successful(self) -> bool:
        """Whether the task ended with a value (status ``succeeded``).

        Returns:
            True only when ``get()`` would return its value at once.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return self.status() == "succeeded"

    def failed(self) -> bool:
        """Whether the task ended without a value: ``failed`` or ``cancelled``.

        A task that raised but will be retried is not failed yet (``retrying``).

        Returns:
            True when ``get()`` would raise at once: ``TaskFailed``, or for a kept
            result no minitask wrote (``status()`` reads ``failed``), ``DecodeError``
            saying why.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return self.status() in ("failed", "cancelled")

    def forget(self) -> bool:
        """Drop the task's kept result (and its progress) now, before it expires.

        Only an ended task is forgotten: its status then reads ``unknown``
        (a dead task still reads ``failed``: its dead letter stays, for
        ``minitask dead``). A task that may still run (queued, scheduled,
        running, retrying) is left exactly as it is: cancel it first. The
        check and the delete are one atomic step in Redis.

        Returns:
            True when a kept result was dropped; False when there was none
            (unknown, expired, forgotten already) or the task has not ended.

        Raises:
            BrokerError: Redis could not be reached.
        """
        if (queue := self._find_queue()) is None or not self._results.forget(queue, self.id):
            return False
        self._sent_later = False  # else get() waits for ever, as for a step not sent
        self._broker.workflows.drop_handle_record(self.id, self._queues.lookup_names()[0])
        return True

    def get(self, timeout: Optional[float] = None) -> R:
        """Wait for the task to finish and return its value.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Returns:
            The task's return value (tuples arrive as lists).

        Raises:
            TaskFailed: the task failed or was cancelled; the remote error is on
                its ``exc_type``, ``message`` and ``traceback``.
            ResultTimeout: ``timeout`` passed first (a ``TimeoutError``); its
                message says where the task is and whether a live worker serves
                its queue. Also raised at once, without waiting, for a task this
                broker does not know (never enqueued here, or its result expired);
                for a workflow step, once it is known to have been sent (its result
                expired or was forgotten), never while it may be not sent yet.
            BrokerError: Redis could not be reached.
            ConfigurationError: ``timeout`` is not a number of seconds, 0 or more
                (NaN or -1, say).
            DecodeError: its kept result, or a key its state is read from, is none
                minitask wrote (names task and key).
        """
        check_timeout(timeout, f"get() on task {self.id}")
        body, queue = wait_result(self, None if timeout is None else time.monotonic() + timeout)
        if body is None:
            raise ResultTimeout(timeout_message_now(self, queue, timeout))
        return self._value_of(body, queue)

    def _promise(self, record: Any) -> Optional[str]:
        """Wait from now on for a later step of a chain that ``record`` says will be
        sent to a queue (``app.handle`` of a chain's last step, in another process)."""
        queue = promised_queue(record)
        if queue is not None:
            self._queue, self._sent_later = queue, True
        return queue

    def _value_of(self, body: bytes, queue: str) -> R:
        outcome = decode_result(body, self.id, self._results.keys(queue).result(self.id))
        failed = outcome.extra.get("failed_task_id")
        if outcome.status == "cancelled" and isinstance(failed, str):
            # a workflow step not run because an earlier one ended dead: that one's error
            raise TaskFailed(failed, outcome.exc_type, outcome.message, outcome.traceback)
        if outcome.status == "succeeded":
            return self._broker.types.from_wire(  # type: ignore[no-any-return]
                outcome.value, "the return value", self.id)
        raise task_failed(self.id, outcome)

    def cancel(self, running: bool = False) -> bool:
        """Withdraw the task, or with ``running`` also stop it if it started.

        A running attempt is stopped within about a second: the process pool
        kills its child (and starts another), the asyncio pool cancels its
        coroutine, the thread pool sets ``current_task().cancel_requested`` for
        the task to check. The task then ends ``cancelled`` (not retried), unless
        it finished first. A workflow step not sent yet is never sent (nor what follows).

        Args:
            running: also stop an attempt that has started.

        Returns:
            True when the task will never run, or (with ``running``) a stop was
            asked of its running attempt; False when it is finished, dead or
            unknown, or running and ``running`` is False.

        Raises:
            BrokerError: Redis could not be reached.
            ConfigurationError: ``running`` is not a bool.
        """
        check_running(running, f"cancel() of task {self.id}")
        unsent, queue = _unsent(self, self._find_queue())
        if unsent or queue is None:
            return unsent
        withdrawn = self._results.cancel(queue, self.id, self._result_ttl_ms)
        if withdrawn is not None:
            self._workflow_stops(withdrawn)
            return True
        return running and self._cancels.request(queue, self.id)

    def _workflow_stops(self, body: bytes) -> None:
        """A withdrawn workflow step: what would have followed it is cancelled too (and
        its group fails), saying this step was cancelled, rather than wait for ever."""
        try:
            message = decode_message(body)
            frame = frame_of(message)
        except DecodeError:
            return  # not a message minitask can read: nothing of a workflow to carry on
        if frame is not None:
            failure = Failure(self.id, message.task, "Cancelled", "cancelled before it "
                              "started", "")
            self._broker.workflows.stopped(frame, failure, wall_ms())

    # -- the same, awaited (redis.asyncio: the event loop is never blocked) ----------

    def progress(self) -> Optional[Progress]:
        """The last progress the task reported with ``set_progress``, or None.

        It is at most about a tenth of a second behind the task's last call, and
        expires with the task's result.

        Returns:
            A ``Progress`` (``current``, ``total``, ``message``, ``at``), or None
            when the task has reported nothing.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = self._find_queue()
        return None if queue is None else self._broker.progress.read(queue, self.id)

    async def aprogress(self) -> Optional[Progress]:
        """Like ``progress()``, awaited.

        Returns:
            A ``Progress``, or None when the task has reported nothing.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = await self._afind_queue()
        if queue is None:
            return None
        key = self._broker.progress.key(queue, self.id)  # PROGRESS_BYTES of it, at most
        return progress_of(key, await self._aio().get(
            key, f"read the progress of task {self.id}", PROGRESS_BYTES))[0]

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
        """Like ``status()``, awaited.

        Returns:
            The status, as ``status()`` says it.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = await self._afind_queue()
        if queue is None:
            return "unknown"
        return status_of(*await self._aio().state(queue, self.id))

    async def aready(self) -> bool:
        """Like ``ready()``, awaited.

        Returns:
            True when the task has ended (succeeded, failed or cancelled).

        Raises:
            BrokerError: Redis could not be reached.
        """
        return await self.astatus() in _ENDED

    async def asuccessful(self) -> bool:
        """Like ``successful()``, awaited.

        Returns:
            True only when the task ended with a value.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return await self.astatus() == "succeeded"

    async def afailed(self) -> bool:
        """Like ``failed()``, awaited.

        Returns:
            True when the task ended failed or cancelled.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return await self.astatus() in ("failed", "cancelled")

    async def aforget(self) -> bool:
        """Like ``forget()``, awaited: the same atomic step.

        Returns:
            As ``forget()``: True when a kept result was dropped.

        Raises:
            BrokerError: Redis could not be reached.
        """
        queue = await self._afind_queue()
        call = None if queue is None else self._results.forget_call(queue, self.id)
        if call is None or not await self._aio().run(call, f"forget the result of {self.id}"):
            return False
        self._sent_later = False  # as in forget()
        await self._aio().drop_handle_record(self.id)
        return True

    async def aget(self, timeout: Optional[float] = None) -> R:
        """Like ``get()``, awaited: the wait holds no thread.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Returns:
            The task's return value (tuples arrive as lists).

        Raises:
            TaskFailed: the task failed or was cancelled.
            ResultTimeout: ``timeout`` passed first (a ``TimeoutError``).
            BrokerError: Redis could not be reached.
            ConfigurationError: ``timeout`` is not a number of seconds, 0 or more
                (NaN or -1, say).
            DecodeError: as ``get()``'s.
        """
        check_timeout(timeout, f"aget() on task {self.id}")
        deadline = None if timeout is None else time.monotonic() + timeout
        before = cancels_asked()  # each await below is checked: see keep_cancel
        queue = await self._afind_queue()
        broker = self._aio()
        if queue is None or (not self._sent_later
                             and await agone(self, broker, queue, deadline)):
            promised = self._promise(await _arecord(self, broker))
            keep_cancel(before)
            if promised is None:
                raise ResultTimeout(_unknown_message(self, queue))
            queue = promised
        if self._sent_later and await agone(self, broker, queue, deadline):
            keep_cancel(before)
            raise ResultTimeout(_unknown_message(self, queue, True))
        while True:
            keep_cancel(before)
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            body = await broker.wait_result(queue, self.id, min(remaining, 5.0)
                                            if remaining > 0 else 0.002)
            keep_cancel(before)
            if body is not None:
                return self._value_of(body, queue)
            if deadline is not None and time.monotonic() >= deadline:
                message = await atimeout_message(self, queue, timeout)
                keep_cancel(before)
                raise ResultTimeout(message)
            if await agone(self, broker, queue, deadline):
                keep_cancel(before)
                raise ResultTimeout(_unknown_message(self, queue, self._sent_later))

    async def acancel(self, running: bool = False) -> bool:
        """Like ``cancel()``, awaited.

        Args:
            running: also stop an attempt that has started.

        Returns:
            As ``cancel()``: True when the task will never run or a stop was asked.

        Raises:
            BrokerError: Redis could not be reached.
            ConfigurationError: ``running`` is not a bool.
        """
        check_running(running, f"acancel() of task {self.id}")
        unsent, queue = await asyncio.get_running_loop().run_in_executor(  # (as below)
            None, _unsent, self, await self._afind_queue())
        if unsent or queue is None:
            return unsent
        broker = self._aio()
        withdrawn = await broker.cancel(queue, self.id, self._result_ttl_ms)
        if withdrawn is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._workflow_stops,
                                                             withdrawn)
            return True
        return running and await broker.request_cancel(queue, self.id)


class StepHandle(TaskHandle[Any]):
    """A workflow task's handle: a step cancelled because an earlier one ended dead
    raises ``TaskFailed`` naming that step and carrying its error; a later step is
    waited for before it is sent, and once its marker says it was sent, a step unknown
    is gone (its result expired or forgotten): ``get()`` says so at once.

    ``name``: its task's name, for messages (None: not known, a rebuilt handle);
    ``sent``: it was sent already (one of the first tasks ``delay()`` sent): unknown,
    it is gone; ``before``: (queue, id) of the tasks whose end sends it (``ranout``'s
    ``step_gone`` reads whether one is still pending)."""

    _sent_later = True

    def __init__(self, broker: Broker, queue: str, task_id: str, result_ttl_ms: int,
                 async_broker: "Optional[Callable[[], AsyncBroker]]" = None, *,
                 name: Optional[str] = None, sent: bool = False,
                 before: Sequence[Tuple[str, str]] = ()) -> None:
        super().__init__(broker, queue, task_id, result_ttl_ms, async_broker)
        self._name = name
        self._sent_later = not sent
        self._before = before


def wait_result(handle: TaskHandle[Any], deadline: Optional[float]) -> Tuple[Optional[bytes], str]:
    """get()'s wait: (result, queue); (None, queue) past ``deadline``: the caller says why."""
    queue = handle._find_queue()
    if queue is None or (not handle._sent_later and gone(handle, queue, deadline)):
        promised = handle._promise(handle._broker.workflows.handle_record(
            handle.id, handle._queues.lookup_names()[0]))
        if promised is None:
            raise ResultTimeout(_unknown_message(handle, queue))
        queue = promised
    if handle._sent_later and step_gone(handle, queue, deadline):
        raise ResultTimeout(_unknown_message(handle, queue, True))
    while True:
        remaining = 5.0 if deadline is None else deadline - time.monotonic()
        body = handle._results.wait_result(queue, handle.id, min(remaining, 5.0)
                                           if remaining > 0 else 0.002)
        if body is not None:
            return body, queue
        if deadline is not None and time.monotonic() >= deadline:
            return None, queue
        if (step_gone if handle._sent_later else gone)(handle, queue, deadline):
            raise ResultTimeout(_unknown_message(handle, queue, handle._sent_later))


def _unsent(handle: TaskHandle[Any], queue: Optional[str]) -> Tuple[bool, Optional[str]]:
    """Cancel ``handle``'s task if it is a workflow step not sent yet (``UnsentSteps``):
    whether it was, and its queue (None: no task nor step of its id is known)."""
    return handle._broker.unsent.cancel(handle.id, queue, handle._sent_later,
                                        handle._result_ttl_ms,
                                        lambda: handle._queues.lookup_names()[0])


def _unknown_message(handle: TaskHandle[Any], queue: Optional[str], sent: bool = False) -> str:
    """Why there is nothing to wait for: a task unknown; one known to have been sent
    (``sent``: its marker says so; a workflow's first task) is gone, and named."""
    if queue is not None and (sent or isinstance(handle, StepHandle)):
        return gone_message(handle.id, getattr(handle, "_name", None), queue,
                            handle._broker.description)
    return unknown_message(handle.id, queue, handle._broker.description)


async def _arecord(handle: TaskHandle[Any], broker: "AsyncBroker") -> Any:
    """The handle record of this id, as ``WorkflowStore.handle_record`` reads it."""
    keys = [handle._broker.workflows.keys(queue).handle(handle.id)
            for queue in await broker.queue_names()]
    return first_record(zip(keys, await broker.ranges(keys, HANDLE_BYTES,
                                                      f"read the record of {handle.id}")))
