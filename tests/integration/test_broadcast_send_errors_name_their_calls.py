"""A broadcast send whose reply is lost names the calls that may be in Redis: its
error said ``sent`` True with ``task_ids`` empty and no word of how to check, though
the call may run on every subscriber (the rule of every other send: the error's lists
say what Redis holds). On a real redis-server, the reply dropped by a proxy."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broadcast import BroadcastHandle
from minitask.errors import BrokerError
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_broadcast_send_whose_reply_is_lost_names_its_calls(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    proxy = CuttingProxy(redis_server)
    app = Minitask("lostbc", broker=proxy.url)

    @app.task(broadcast=True, queue="news")
    def t(value: str) -> str:
        return value

    try:
        t.delay("warm")  # connected, scripts loaded
        proxy.cut_reply_to(b"lost-broadcast-marker")
        with pytest.raises(BrokerError) as lost:
            t.delay_many([("lost-broadcast-marker",), ("b",)])
        error = lost.value
        assert proxy.cuts == 1 and error.sent, str(error)
        assert len(error.task_ids) == 2 and not error.enqueued_ids  # (was: none named)
        assert not error.unsent_ids
        assert "BroadcastHandle(app.broker, 'news'" in str(error)
        BroadcastHandle(app.broker, "news", error.task_ids[0]).status()  # as it says: answers
    finally:
        app.close()
        proxy.close()
