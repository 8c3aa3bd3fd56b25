"""ProgressStore: the last progress a running task reported, one key per task.

Written by the worker's coalescing writer (``worker/progress.py``), at most a
few times a second whatever the task does; read by handles and the dashboard.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..broker.keys import queue_keys
from ..wire.message import Progress
from ..wire.serializer import unpack_progress
from .foreign import ignored, raise_refusals
from .store import Store

#: One pending write: (queue, task id, packed progress, time to live in ms).
Entry = Tuple[str, str, bytes, int]


class ProgressStore(Store):
    """The progress keys of one app's tasks."""

    def write(self, entries: Sequence[Entry]) -> None:
        """Set each task's progress, expiring with its result, in one round trip."""
        with self.transport.errors("record task progress"):
            pipe = self.transport.client.pipeline(transaction=False)
            for queue, task_id, packed, ttl_ms in entries:
                pipe.set(self.key(queue, task_id), packed,
                         px=max(1, ttl_ms))
            pipe.execute()

    def touch(self, queue: str, task_id: str, ttl_ms: int) -> None:
        """Restart a progress key's time to live: it was written while the task ran,
        and must last as long as the result written now."""
        with self.transport.errors("record task progress"):
            self.transport.client.pexpire(self.key(queue, task_id), max(1, ttl_ms))

    def key(self, queue: str, task_id: str) -> str:
        return queue_keys(self.app_name, queue).progress(task_id)

    def read(self, queue: str, task_id: str) -> Optional[Progress]:
        """A task's last progress; None when it has none, or when what its key holds is
        no progress minitask wrote (another type, other bytes): as if none, said once."""
        return self.read_many([(queue, task_id)])[0]

    def read_many(self, tasks: Sequence[Tuple[str, str]]) -> List[Optional[Progress]]:
        """The last progress of each ``(queue, task id)``, in one round trip (as
        ``read`` for each)."""
        if not tasks:
            return []
        keys = [self.key(queue, task_id) for queue, task_id in tasks]
        with self.transport.errors(f"read the progress of task {tasks[0][1]}"
                                   + (f" and {len(tasks) - 1} more" if len(tasks) > 1 else "")):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.get(key)
            found = pipe.execute(raise_on_error=False)
            raise_refusals(found)
        read: List[Optional[Progress]] = []
        for key, data in zip(keys, found):
            if isinstance(data, Exception):
                ignored(key, f"it holds another type than a string ({data})")
                read.append(None)
            else:
                read.append(unpack_progress(data) if isinstance(data, bytes) else None)
        return read
