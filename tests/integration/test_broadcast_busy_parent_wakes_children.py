"""A broadcast subscriber busy (or gone) does not hold up its wake-tree children, on a
real redis-server (the last session's open LOW).

Wake-ups spread as a tree: a send wakes the 16 newest subscribers, and each wakes its
16 children when it pulls. A parent whose workers were all busy pulled only once a
slot freed, so its children ran a call only at their own wait's end, up to 5 s later
(/work/wt/notes/fixlows29s/busy_parent_probe.py: 1.7-3.7 s a call). Now a woken lane
whose wake list held tokens already (no worker of it waits there) has its children
woken by the same send; an idle parent still wakes its own (a send's cost stays
bounded).

No worker runs here: the wake lists are read as a worker would find them.
"""
from __future__ import annotations

import time
from typing import Any, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import lane, queue_keys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "b"
#: Subscribed after the child: 15 names and the parent, the newest (rank 0).
LATER = [f"f{i:02d}" for i in range(15)] + ["parent"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _tree(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    """'child' subscribed first, then the 16 of ``LATER``: 'parent' ranks 0, 'child'
    16, its first child. A call sent before them moves the sequence on."""
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    store = app.broker.broadcasts
    store.subscribe(QUEUE, "child", _now_ms())
    tick.delay(0)
    for subscriber in LATER:
        store.subscribe(QUEUE, subscriber, _now_ms())
    return app, tick


def _wake(name: str, subscriber: str) -> str:
    return queue_keys(name, lane(QUEUE, subscriber)).wake


@pytest.mark.parametrize("parent_busy", [True, False], ids=["busy", "idle"])
def test_a_busy_parents_children_are_woken_by_the_send(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", parent_busy: bool) -> None:
    name = f"busy-{parent_busy}"
    app, tick = _tree(redis_server, name)
    try:
        tick.delay(1)  # the send learns whom it wakes (declared from then on)
        admin.delete(_wake(name, "child"))
        if not parent_busy:  # its worker took the token: it waits, and will pull
            admin.delete(_wake(name, "parent"))
        assert admin.llen(_wake(name, "parent")) == (1 if parent_busy else 0)
        tick.delay(2)
        child_tokens = admin.llen(_wake(name, "child"))
    finally:
        app.close()
    if parent_busy:
        assert child_tokens >= 1, "the child of a busy parent was not woken by the send"
    else:
        assert child_tokens == 0, "an idle parent's child was woken by the send itself"
