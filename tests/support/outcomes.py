"""What the outcome tests share: a raw enqueue, probes of a queue, a retryable error, a
task ending each way (``each_outcome``)."""
from __future__ import annotations

import datetime as dt
from typing import Any, Tuple

from minitask import Minitask, Retry, current_task
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


def each_outcome(app: Minitask) -> Tuple[Any, Any, Any]:
    """Three tasks of ``app`` that return their argument: ``ok`` at once, ``flaky`` on its
    second attempt (its first asks for a retry, with no delay), and ``bad`` never (it
    raises ValueError, with no retry: dead-lettered)."""
    @app.task
    def ok(x: Any) -> Any:
        return x

    @app.task(retries=1, retry_backoff=0)
    def flaky(x: Any) -> Any:
        context = current_task()
        assert context is not None
        if context.attempt == 1:
            raise Retry(delay=0)
        return x

    @app.task(retries=0)
    def bad(x: Any) -> Any:
        raise ValueError(f"bad {x}")

    return ok, flaky, bad
