"""The wake tokens enqueue leaves for idle workers: one per new ready task; the
scripts keep at most WAKE_CAP, and write nothing once the cap is reached.

Runs on fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

from typing import Any, Callable, Tuple

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import WAKE_CAP


@pytest.fixture
def queue(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Any, Any, str]:
    """An app, its task ``job(n)`` of the default queue, its client and the wake list."""
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    return app, job, app.broker.transport.client, QueueKeys(app.name, "default").wake


def test_tokens_stop_at_the_cap_and_taken_ones_come_back(
        queue: Tuple[Minitask, Any, Any, str]) -> None:
    app, job, client, wake = queue
    job.delay(0)
    assert client.llen(wake) == 1
    job.delay_many([(n,) for n in range(WAKE_CAP + 40)])
    assert client.llen(wake) == WAKE_CAP
    for n in range(20):
        job.apply_async((n,), task_id=f"named-{n}")  # enqueue_now.lua: capped too
    assert client.llen(wake) == WAKE_CAP
    client.lpop(wake, 3)  # three idle workers woke
    job.delay_many([(n,) for n in range(2)])
    assert client.llen(wake) == WAKE_CAP - 1
    job.delay_many([(n,) for n in range(5)])
    assert client.llen(wake) == WAKE_CAP
    assert app.broker.queues.counts("default")["ready"] == 1 + WAKE_CAP + 40 + 20 + 7


def test_a_plain_delay_adds_a_token_per_task_and_an_empty_fetch_clears_them(
        queue: Tuple[Minitask, Any, Any, str]) -> None:
    """A plain ``delay()`` runs no script (QueueStore.push), so it cannot read the
    cap: one token per task, two bytes each, gone once a fetch finds the queue empty."""
    app, job, client, wake = queue
    job.delay_many([(n,) for n in range(WAKE_CAP)])
    for n in range(20):
        job.delay(n)
    assert client.llen(wake) == WAKE_CAP + 20
    app.worker(burst=True).run()
    assert client.exists(wake) == 0
    assert app.broker.queues.counts("default")["ready"] == 0
