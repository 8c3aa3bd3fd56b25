"""Batch: enqueue calls held back in a ``with app.batch():`` block, sent when it ends.

The open batches live in a ContextVar, so a batch is its own thread's (or
asyncio task's) alone: a call made in another thread is sent at once. Each
batch knows the one around it (of any app), so blocks nest: an inner block
of the same app hands its calls to the outer one when it ends, and only the
outermost sends, in one write.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Dict, FrozenSet, Generic, Iterable, List, Optional, Tuple, TypeVar

from .errors import BatchNotSent
from .handle import TaskHandle
from .wire.message import Progress

R = TypeVar("R")

#: One checked, encoded message: (id, body, priority, due ms or 0).
Entry = Tuple[str, bytes, int, int]

OPEN = "open"
SENT = "sent"
DISCARDED = "discarded"
FAILED = "failed"

#: The innermost batch block this context is in, of any app.
_innermost: ContextVar[Optional["Batch"]] = ContextVar("minitask_batch", default=None)


class Batch:
    """The calls one ``app.batch()`` block of one context has enqueued so far."""

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.around = _innermost.get()
        self.by_queue: Dict[str, List[Entry]] = {}
        #: The flow specs of its flow-controlled (or grouped) calls, by id (limits.py).
        self.specs: Dict[str, str] = {}
        self._state = OPEN
        #: Of a block sent in part, the calls not enqueued (refused, or never sent)
        self._unsent: FrozenSet[str] = frozenset()
        #: The outer block this one's calls went to when it ended.
        self._merged: Optional[Batch] = None
        self._token: Any = None

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.by_queue.values())

    @property
    def state(self) -> str:
        """open, sent, discarded or failed: the outermost block's, once merged."""
        return self._outermost()._state

    def unsent(self, task_id: str) -> bool:
        """Whether the call ``task_id`` of a block sent in part was not enqueued."""
        return task_id in self._outermost()._unsent

    def _outermost(self) -> "Batch":
        batch = self
        while batch._merged is not None:
            batch = batch._merged
        return batch

    def add(self, by_queue: Dict[str, List[Entry]], specs: Dict[str, str]) -> None:
        for queue, entries in by_queue.items():
            self.by_queue.setdefault(queue, []).extend(entries)
        self.specs.update(specs)

    def enter(self) -> None:
        """The block starts: calls of this context go to this batch from now on."""
        self._token = _innermost.set(self)

    def close(self, state: str, unsent: Iterable[str] = ()) -> None:
        """The block ended: sent (but for the calls ``unsent``: refused, or never sent
        after a refusal or a cut write), discarded (an exception) or failed (the write)."""
        _innermost.reset(self._token)
        self._state = state
        self._unsent = frozenset(unsent)

    def merge_into(self, outer: "Batch") -> None:
        """The block ended inside another of the same app: its calls go with that one's."""
        _innermost.reset(self._token)
        outer.add(self.by_queue, self.specs)
        self._merged = outer


def open_batch(owner: object) -> Optional[Batch]:
    """The innermost open block of ``owner`` (an app's sender) in this context (an
    asyncio task keeps a copy of the context it was made in: its blocks may be over)."""
    batch = _innermost.get()
    while batch is not None and (batch.owner is not owner or batch._state != OPEN
                                 or batch._merged is not None):
        batch = batch.around
    return batch


class PendingHandle(TaskHandle[R], Generic[R]):
    """A handle made inside a batch block: it answers once the block has sent its task."""

    def __init__(self, batch: Batch, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch = batch

    def __repr__(self) -> str:
        return f"<TaskHandle {self.id} queue={self._queue!r} batch={self._batch.state}>"

    def _check_sent(self) -> None:
        state = self._batch.state
        if state == SENT and not self._batch.unsent(self.id):
            return
        if state == SENT:
            raise BatchNotSent(f"task {self.id}: its app.batch() block was sent in part, not "
                               f"this call (refused by Redis, or never sent after a refusal "
                               f"or a cut write: the block's BrokerError names it in its "
                               f"unsent_ids), so it is not enqueued: send it again as it is")
        if state == OPEN:
            why = ("its app.batch() block has not ended yet, so it is not sent: ask after "
                   "the block")
        elif state == DISCARDED:
            why = ("its app.batch() block ended with an exception, so nothing of the block "
                   "was sent")
        else:
            why = ("sending its app.batch() block failed (see the BrokerError it raised); "
                   "the task may or may not be enqueued: check with app.handle(id)")
        raise BatchNotSent(f"task {self.id}: {why}")

    def status(self) -> str:
        self._check_sent()
        return super().status()

    def get(self, timeout: Optional[float] = None) -> R:
        self._check_sent()
        return super().get(timeout)

    def cancel(self, running: bool = False) -> bool:
        self._check_sent()
        return super().cancel(running)

    async def astatus(self) -> str:
        self._check_sent()
        return await super().astatus()

    async def aget(self, timeout: Optional[float] = None) -> R:
        self._check_sent()
        return await super().aget(timeout)

    async def acancel(self, running: bool = False) -> bool:
        self._check_sent()
        return await super().acancel(running)

    def progress(self) -> Optional[Progress]:
        self._check_sent()
        return super().progress()

    async def aprogress(self) -> Optional[Progress]:
        self._check_sent()
        return await super().aprogress()
