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


def test_a_plain_delay_keeps_the_tokens_bounded_and_an_empty_fetch_clears_them(
        queue: Tuple[Minitask, Any, Any, str]) -> None:
    """A plain ``delay()`` runs no script (QueueStore.push), so it cannot read the cap
    first: its first push into a queue, and every WAKE_CAP-th after it, trims the
    list to its last WAKE_CAP in the same transaction. A queue whose workers are
    always behind is never found empty: uncapped, its tokens would grow with every
    task sent to it."""
    app, job, client, wake = queue
    job.delay(0)  # the queue's first call goes by enqueue.lua (which registers it)
    job.delay_many([(n,) for n in range(WAKE_CAP + 10)])
    assert client.llen(wake) == WAKE_CAP
    lengths = []
    for n in range(3 * WAKE_CAP):
        job.delay(n)
        lengths.append(client.llen(wake))
    # trimmed with the 1st, the WAKE_CAP + 1st and the 2 * WAKE_CAP + 1st push
    assert max(lengths) == 2 * WAKE_CAP - 1
    assert [lengths[0], lengths[WAKE_CAP], lengths[2 * WAKE_CAP]] == [WAKE_CAP] * 3
    assert lengths[-1] == 2 * WAKE_CAP - 1
    assert app.broker.queues.counts("default")["ready"] == 1 + WAKE_CAP + 10 + 3 * WAKE_CAP
    app.worker(burst=True).run()
    assert client.exists(wake) == 0
    assert app.broker.queues.counts("default")["ready"] == 0
