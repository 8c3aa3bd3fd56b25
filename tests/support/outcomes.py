"""What the outcome tests share: a raw enqueue, probes of a queue, a retryable error."""
from __future__ import annotations

import datetime as dt
from typing import Any

from minitask import Minitask
from minitask.broker.keys import QueueKeys

UTC = dt.timezone.utc


def utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC)


def due_ms(client: Any, app: Minitask, queue: str, task_id: str) -> int:
    score = client.zscore(QueueKeys(app.name, queue).delayed, task_id)
    assert score is not None, f"{task_id} is not in the delayed set of {queue!r}"
    return int(score) // 10


def inject(app: Minitask, queue: str, task_id: str, body: bytes, priority: int = 5) -> None:
    """Enqueue raw bytes as a message, the way a producer in another language would."""
    assert app.broker.queues.enqueue(queue, [(task_id, body, priority, 0)], app.clock.now_ms()) == 1


def ready(app: Minitask, queue: str = "default") -> int:
    return int(app.broker.queues.counts(queue)["ready"])


class Flaky(Exception):
    pass
