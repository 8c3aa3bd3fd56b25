"""The running attempt's context: ``current_task`` describes the attempt and its queue.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock.
"""
from __future__ import annotations

from typing import Any, Callable, List


from minitask import Minitask, current_task
from tests.support.draining import drain
from tests.support.outcomes import utc


def test_current_task_describes_the_running_attempt(make_app: Callable[..., Minitask],
                                                    clock: Any) -> None:
    app = make_app()
    contexts: List[Any] = []

    @app.task(name="shop.ctx", queue="ctx", priority=4)
    def ctx() -> None:
        contexts.append(current_task())

    assert current_task() is None
    enqueued_ms = clock.ms
    now = ctx.delay()
    later = ctx.apply_async(priority=8, delay=10)
    clock.advance(10)
    drain(app.worker(queues=["ctx"]))
    by_id = {context.id: context for context in contexts}
    first, second = by_id[now.id], by_id[later.id]
    assert first.name == "shop.ctx"
    assert first.queue == "ctx"
    assert (first.priority, second.priority) == (4, 8)
    assert (first.attempt, first.delivery) == (1, 1)
    assert first.enqueued_at == utc(enqueued_ms) and first.enqueued_at.tzinfo is not None
    assert first.eta is None
    assert second.eta == utc(enqueued_ms + 10_000)
    assert current_task() is None


def test_current_task_reports_the_per_call_queue(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    queues: List[str] = []

    @app.task
    def where() -> None:
        context = current_task()
        assert context is not None
        queues.append(context.queue)

    where.apply_async(queue="special")
    drain(app.worker(queues=["special"]))
    assert queues == ["special"]
