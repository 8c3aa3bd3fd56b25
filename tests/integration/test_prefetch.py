"""Prefetch: a worker leases several tasks per round trip, keeps them leased while they
wait, and gives back the ones it did not start when it stops."""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain


def test_worker_leases_up_to_prefetch_tasks_and_runs_them_in_order(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    app = make_app(prefetch=3)
    ran: List[int] = []
    step = app.task(ran.append)
    for index in range(5):
        step.delay(index)
    leases = QueueKeys(app.name, "default").leases
    worker = app.worker()

    assert worker.run_once() is True
    assert ran == [0]
    assert redis_client.zcard(leases) == 2, "the two prefetched tasks wait under a lease"
    drain(worker)
    assert ran == [0, 1, 2, 3, 4]
    assert redis_client.zcard(leases) == 0


def test_stopping_gives_back_the_prefetched_tasks_to_the_head_of_the_queue(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    app = make_app(prefetch=4)
    ran: List[int] = []
    step = app.task(ran.append)
    for index in range(6):
        step.delay(index)
    worker = app.worker()
    assert worker.run_once() is True

    worker._leases.release_all()

    keys = QueueKeys(app.name, "default")
    assert redis_client.zcard(keys.leases) == 0
    assert redis_client.hlen(keys.deliveries) == 0, "a give-back is no delivery"
    drain(app.worker())
    assert ran == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("prefetch", [0, 1001, "2", 1.5])
def test_prefetch_outside_1_to_1000_is_refused(
        make_app: Callable[..., Minitask], prefetch: Any) -> None:
    with pytest.raises(ConfigurationError, match="prefetch"):
        make_app(prefetch=prefetch)
    with pytest.raises(ConfigurationError, match="prefetch"):
        make_app().worker(prefetch=prefetch)
