"""ProgressStore: the last progress a running task reported, one key per task.

Written by the worker's coalescing writer (``worker/progress.py``), at most a
few times a second whatever the task does; read by handles and the dashboard.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..broker.keys import queue_keys
from ..printable import printable
from ..wire.message import Progress
from ..wire.serializer import unpack_progress
from .foreign import ignored, raise_refusals
from .store import Store

#: One pending write: (queue, task id, packed progress, time to live in ms).
Entry = Tuple[str, str, bytes, int]

#: The most bytes of a progress record read: the longest minitask writes (a message cut
#: at 1,000 characters, of up to 4 UTF-8 bytes each, and three numbers) with room to
#: spare. A longer record is no progress minitask wrote, and is never read whole.
PROGRESS_BYTES = 8 * 1024


def progress_of(key: str, data: Any) -> Tuple[Optional[Progress], str]:
    """A progress record as read from ``key`` (at most ``PROGRESS_BYTES`` + 1 bytes of
    it, with GETRANGE: b"" for no key), and ""; or None and why what the key holds is
    no progress minitask wrote (another type, longer, other bytes: said once), "" when
    it holds none."""
    if isinstance(data, Exception):
        why = f"it holds another type than a string ({data})"
    elif not isinstance(data, bytes) or not data:
        return None, ""
    elif len(data) > PROGRESS_BYTES:
        why = (f"it is longer than {PROGRESS_BYTES:,} bytes (PROGRESS_BYTES), longer than "
               f"any progress minitask writes: not read whole")
    elif (progress := unpack_progress(data)) is not None:
        return progress, ""
    else:
        why = "it holds no progress minitask writes"
    ignored(key, why)
    return None, f"the progress record {printable(key)} is unreadable: {why}"


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
        no progress minitask wrote (another type, other bytes, longer than
        ``PROGRESS_BYTES``: never read whole): as if none, said once."""
        return self.read_many([(queue, task_id)])[0]

    def read_noted(self, queue: str, task_id: str) -> Tuple[Optional[Progress], str]:
        """``read``, and why what the key holds is no progress ("" when it is one, or
        when there is none): ``minitask inspect`` notes it."""
        return self._read([(queue, task_id)])[0]

    def read_many(self, tasks: Sequence[Tuple[str, str]]) -> List[Optional[Progress]]:
        """The last progress of each ``(queue, task id)``, in one round trip (as
        ``read`` for each)."""
        return [progress for progress, _ in self._read(tasks)]

    def _read(self, tasks: Sequence[Tuple[str, str]]) -> List[Tuple[Optional[Progress], str]]:
        if not tasks:
            return []
        keys = [self.key(queue, task_id) for queue, task_id in tasks]
        with self.transport.errors(f"read the progress of task {tasks[0][1]}"
                                   + (f" and {len(tasks) - 1} more" if len(tasks) > 1 else "")):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.getrange(key, 0, PROGRESS_BYTES)  # one byte more: a longer one shows
            found = pipe.execute(raise_on_error=False)
            raise_refusals(found)
        return [progress_of(key, data) for key, data in zip(keys, found)]
