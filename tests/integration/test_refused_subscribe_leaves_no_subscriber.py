"""A subscribe refused by Redis (an ACL without TIME, or without one of the write
commands broadcast_subscribe.lua uses) leaves no subscriber: before, the script wrote
the cursor, the place and since before it read the server's clock, so a worker whose
ACL lacked TIME exited at start yet stayed a subscriber, and every later broadcast
call's join() waited for it until it was unsubscribed by hand."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.broadcasts import now_ms
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

PARTS = ("state", "log", "bodies", "sent", "cursors", "seen", "places", "since", "alive")


def dumped(admin: Any) -> Dict[bytes, Any]:
    """Every key of the server, as DUMP gives it (what a refused call must not change)."""
    return {key: admin.dump(key) for key in admin.keys("*")}


@pytest.mark.parametrize("refused", ["time", "hset", "zadd", "hdel"])
def test_a_refused_subscribe_writes_nothing(server: RedisServer, admin: Any,
                                            refused: str) -> None:
    sender = Minitask("subs", broker=server.client())
    sender.task(name="hear", broadcast=True, queue="news")(lambda n: n)
    limited = Minitask("subs", broker=user_without(admin, server, refused))
    keys = QueueKeys("subs", "news")
    try:
        assert sender.broker.broadcasts.subscribe("news", "A", now_ms())
        sender.tasks["hear"].delay(1)
        # a queue an older minitask indexed nothing of: the subscribe scans the cursors
        admin.hdel(keys.broadcast("state"), "indexed")
        before = dumped(admin)
        with pytest.raises(BrokerError):
            limited.broker.broadcasts.subscribe("news", "B", now_ms())
        assert dumped(admin) == before
        for part in PARTS:
            key = keys.broadcast(part)
            if admin.type(key) == b"hash":
                assert not admin.hexists(key, "B"), part
            elif admin.type(key) == b"zset":
                assert admin.zscore(key, "B") is None, part
        # the same subscribe, allowed, subscribes it from the last call sent
        assert sender.broker.broadcasts.subscribe("news", "B", now_ms())
        assert admin.zscore(keys.broadcast("since"), "B") == 1
    finally:
        limited.close()
        sender.close()
