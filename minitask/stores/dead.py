"""DeadLetterStore: tasks that will not run again, kept with why; requeue and purge."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..wire.message import MAX_MS
from .queue import BATCH_LIMIT
from .store import Store

_SCRIPTS = ("revive", "purge_dead")


@dataclass(frozen=True)
class DeadLetter:
    task_id: str
    queue: str
    dead_at_ms: int
    body: Optional[bytes]
    info: Optional[bytes]


def _time_ms(score: float) -> int:
    """A dead letter's score as a time (ms) that a datetime can hold: one that is
    no time (inf, -inf, beyond the year 9999; no minitask wrote it) is clamped."""
    if math.isnan(score):
        return 0
    return int(min(max(score, 0.0), float(MAX_MS)))


class DeadLetterStore(Store):
    """The dead letters of one app's queues."""

    scripts = _SCRIPTS

    def letters(self, queue: str, limit: int) -> List[DeadLetter]:
        """The oldest ``limit`` dead letters of ``queue``, with message and reason."""
        k = self.keys(queue)
        client = self.transport.client
        with self.transport.errors(f"list dead letters of queue {queue!r}"):
            entries: List[Tuple[bytes, float]] = client.zrange(  # type: ignore[assignment]
                k.dead, 0, limit - 1, withscores=True)
            if not entries:
                return []
            raw = [task_id for task_id, _ in entries]
            pipe = client.pipeline(transaction=False)
            pipe.hmget(k.messages, raw)
            pipe.hmget(k.dead_info, raw)
            bodies, infos = pipe.execute()
        # an id that is not UTF-8 (no minitask wrote it) is shown escaped
        return [DeadLetter(task_id.decode(errors="backslashreplace"), queue, _time_ms(score),
                           body, info)
                for (task_id, score), body, info in zip(entries, bodies, infos)]

    def ids(self, queue: str, limit: int) -> List[str]:
        """The ids of the oldest ``limit`` dead letters; one that is not UTF-8 (no
        minitask wrote it) cannot be named in a call, and is left out."""
        with self.transport.errors(f"list dead letters of queue {queue!r}"):
            raw: List[bytes] = self.transport.client.zrange(  # type: ignore[assignment]
                self.keys(queue).dead, 0, limit - 1)
        found = []
        for task_id in raw:
            try:
                found.append(task_id.decode())
            except UnicodeDecodeError:
                continue
        return found

    def revive(self, queue: str, task_id: str, body: bytes, priority: int, now_ms: int) -> bool:
        """Put a dead task at the tail of its queue, behind every task due by ``now_ms``."""
        k = self.keys(queue)
        done = self.transport.run(
            "revive", (k.dead, k.dead_info, k.messages, k.wake, k.result(task_id), *k.ready,
                       k.delayed, k.order, k.flow, k.flow_dead),
            (task_id, body, priority, now_ms, BATCH_LIMIT), f"requeue dead task {task_id}")
        return bool(done)

    def purge(self, queue: str, task_ids: Sequence[str]) -> int:
        if not task_ids:
            return 0
        k = self.keys(queue)
        return int(self.transport.run("purge_dead", (k.dead, k.dead_info, k.messages, k.flow_dead),
                                      task_ids,
                                      f"purge dead letters of queue {queue!r}"))
