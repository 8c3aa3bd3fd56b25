"""A subscriber cursor that is no call sequence (planted, or damaged by hand) is read
as 0 when sends and pulls drop the calls every subscriber has pulled
(broadcast_lib.lua's least_cursor): the calls its subscriber had not pulled stay
logged, though every other subscriber pulled them, and it runs them when it
restarts from the oldest call logged (a worker started again after the damage
too). Were the cursor left out, the subscriber ahead of it would have them
dropped. On fakeredis and the suite's redis-server."""
from __future__ import annotations

from typing import Callable, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.draining import drain

QUEUE = "config"


@pytest.mark.parametrize("restarted", [False, True])
@pytest.mark.parametrize("planted", ["abc", "nan", "inf", "1.5", "-1"])
def test_calls_a_damaged_subscriber_did_not_pull_stay_logged_and_run(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        planted: str, restarted: bool) -> None:
    """``restarted``: behind's worker starts again after the damage; its subscribe
    (broadcast_subscribe.lua) keeps the cursor for the pull to restart, where it used
    to set a cursor of text to the last call sent, and calls 2 and 3 never ran."""
    app = make_app("bc")
    ran: List[int] = []

    @app.task(broadcast=True, queue=QUEUE)
    def reload(version: int) -> int:
        ran.append(version)
        return version

    behind = app.worker(queues=[QUEUE], subscriber="behind")
    ahead = app.worker(queues=[QUEUE], subscriber="ahead")
    behind.starting()
    ahead.starting()
    reload.delay(1)
    drain(behind)
    drain(ahead)
    handles = [reload.delay(2), reload.delay(3)]
    drain(ahead)  # ahead pulled 2 and 3, behind has not
    assert app.broker.broadcasts.log_size(QUEUE) == 2
    redis_client.hset(queue_keys("bc", QUEUE).broadcast("cursors"), "behind", planted)
    last = reload.delay(4)  # its send drops what every subscriber pulled
    drain(ahead)  # so does ahead's pull
    assert app.broker.broadcasts.log_size(QUEUE) == 3  # 2, 3 and 4 kept for behind
    if restarted:
        behind = app.worker(queues=[QUEUE], subscriber="behind")
        behind.starting()
    ran.clear()
    drain(behind)  # restarts from the oldest call logged: none lost, none twice
    assert ran == [2, 3, 4]
    assert [h.join(timeout=1) for h in handles + [last]] == [
        {"behind": n, "ahead": n} for n in (2, 3, 4)]
    assert app.broker.broadcasts.log_size(QUEUE) == 0  # all pulled now: dropped
    app.close()
