"""A pull refused for TIME (an ACL without it) leaves no subscriber: a subscriber
with no cursor (its cursors key was of another type, then deleted by an operator)
subscribes in its first pull, and broadcast_pull.lua wrote that cursor and its place
in since before it read the server's clock, so a worker whose ACL lacked TIME was put
in since by a pull Redis then refused, and every later join() waited for it."""
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


def dumped(admin: Any) -> Dict[bytes, Any]:
    """Every key of the server, as DUMP gives it (what a refused call must not change)."""
    return {key: admin.dump(key) for key in admin.keys("*")}


@pytest.mark.parametrize("count", [1, 0], ids=["pull", "re-arm"])
def test_a_pull_refused_for_time_writes_nothing(server: RedisServer, admin: Any,
                                                count: int) -> None:
    sender = Minitask("pulls", broker=server.client())
    sender.task(name="hear", broadcast=True, queue="news")(lambda n: n)
    limited = Minitask("pulls", broker=user_without(admin, server, "time"))
    keys = QueueKeys("pulls", "news")
    try:
        assert sender.broker.broadcasts.subscribe("news", "A", now_ms())
        sender.tasks["hear"].delay(1)
        before = dumped(admin)
        store = limited.broker.broadcasts
        with pytest.raises(BrokerError):
            limited.broker.transport.run_calls(
                [store.pull_call("news", "B", count, now_ms())], "pull as B")
        assert dumped(admin) == before
        assert not admin.hexists(keys.broadcast("cursors"), "B")
        assert admin.zscore(keys.broadcast("since"), "B") is None
        assert admin.zscore(keys.broadcast("places"), "B") is None
    finally:
        limited.close()
        sender.close()
