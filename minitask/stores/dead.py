"""DeadLetterStore: tasks that will not run again, kept with why; requeue and purge."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..keys import QueueKeys, queue_keys
from ..transport import Transport, text
from .queue import BATCH_LIMIT
from .scripts import source

_SCRIPTS = ("revive", "purge_dead")


@dataclass(frozen=True)
class DeadLetter:
    task_id: str
    queue: str
    dead_at_ms: int
    body: Optional[bytes]
    info: Optional[bytes]


class DeadLetterStore:
    """The dead letters of one app's queues."""

    def __init__(self, transport: Transport, app_name: str) -> None:
        self.transport = transport
        self.app_name = app_name
        for name in _SCRIPTS:
            transport.register(name, source(name))

    def keys(self, queue: str) -> QueueKeys:
        return queue_keys(self.app_name, queue)

    def letters(self, queue: str, limit: int) -> List[DeadLetter]:
        """The oldest ``limit`` dead letters of ``queue``, with message and reason."""
        k = self.keys(queue)
        client = self.transport.client
        with self.transport.errors(f"list dead letters of queue {queue!r}"):
            entries: List[Tuple[bytes, float]] = client.zrange(  # type: ignore[assignment]
                k.dead, 0, limit - 1, withscores=True)
            ids = [text(task_id) for task_id, _ in entries]
            if not ids:
                return []
            pipe = client.pipeline(transaction=False)
            pipe.hmget(k.messages, ids)
            pipe.hmget(k.dead_info, ids)
            bodies, infos = pipe.execute()
        return [DeadLetter(task_id, queue, int(score), body, info)
                for (task_id, (_, score), body, info) in zip(ids, entries, bodies, infos)]

    def ids(self, queue: str, limit: int) -> List[str]:
        with self.transport.errors(f"list dead letters of queue {queue!r}"):
            return [text(i) for i in self.transport.client.zrange(self.keys(queue).dead, 0,
                                                                  limit - 1)]

    def revive(self, queue: str, task_id: str, body: bytes, priority: int, now_ms: int) -> bool:
        """Put a dead task at the tail of its queue, behind every task due by ``now_ms``."""
        k = self.keys(queue)
        done = self.transport.run(
            "revive", (k.dead, k.dead_info, k.messages, k.wake, k.result(task_id), *k.ready,
                       k.delayed, k.order),
            (task_id, body, priority, now_ms, BATCH_LIMIT), f"requeue dead task {task_id}")
        return bool(done)

    def purge(self, queue: str, task_ids: Sequence[str]) -> int:
        if not task_ids:
            return 0
        k = self.keys(queue)
        return int(self.transport.run("purge_dead", (k.dead, k.dead_info, k.messages), task_ids,
                                      f"purge dead letters of queue {queue!r}"))
