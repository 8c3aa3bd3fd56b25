"""A broadcast queue's state holding limits no send wrote, on a real redis-server
(issue 29, probe 17: M1).

The last send's ``maxlen`` and ``ttl`` in ``bcast:state`` feed a pull's drop of the
calls over them. One that is no whole number from 1 up (nan, 1.5, text: a pull
failed on them, naming no key, until a sender sent again; -5, 0, a ttl of nan: the
next pull dropped every call a lagging subscriber had not pulled yet, silently) is
read as missing: the pull drops nothing over it and the lagging subscriber pulls
every call.
"""
from __future__ import annotations

import time
from typing import Any, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.broadcast import Pulled
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "limits"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client(), broadcast_ttl=3600.0,
                   broadcast_maxlen=100)

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _pull(app: Minitask, subscriber: str) -> Pulled:
    store = app.broker.broadcasts
    reply = app.broker.transport.run_calls(
        [store.pull_call(QUEUE, subscriber, 10, _now_ms())], f"pull for {subscriber}")[0]
    return store.pulled(reply)


@pytest.mark.parametrize("field,value", [
    ("maxlen", "nan"), ("maxlen", "-5"), ("maxlen", "0"), ("maxlen", "1.5"),
    ("maxlen", "planted"), ("ttl", "nan"), ("ttl", "-5"), ("ttl", "0"), ("ttl", "-inf"),
])
def test_a_limit_no_send_wrote_drops_nothing_a_lagging_subscriber_has_not_pulled(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", field: str,
        value: str) -> None:
    app, tick = _app(redis_server, "m1")
    k = QueueKeys("m1", QUEUE)
    try:
        store = app.broker.broadcasts
        store.subscribe(QUEUE, "fast", _now_ms())
        store.subscribe(QUEUE, "slow", _now_ms())
        for n in range(3):
            tick.delay(n)
        assert _pull(app, "fast").pulled == 3
        admin.hset(k.broadcast("state"), field, value)
        pulled = _pull(app, "slow")  # failed ('nan', '1.5', text) or dropped all three
        assert (pulled.pulled, pulled.skipped) == (3, 0)
        assert app.broker.broadcasts.log_size(QUEUE) == 0  # pulled by both: deleted
        # the limits are back once a sender sends again
        tick.delay(4)
        assert admin.hget(k.broadcast("state"), field) != value.encode()
        assert _pull(app, "slow").pulled == 1
    finally:
        app.close()
