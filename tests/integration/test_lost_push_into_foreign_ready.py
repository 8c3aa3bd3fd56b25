"""A plain delay() into a ready list of another type whose reply is lost leaves no
message that no fetch can reach (review 29b, M3): inside its MULTI/EXEC the message
was stored and the push refused; the take-back, once run only on the reply, now runs
when the lost reply is found to have done so, and the caller hears the refusal that
names the key (nothing enqueued). On a real redis-server, the reply cut by a proxy."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_lost_reply_of_a_push_refused_leaves_no_orphan_message(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    proxy = CuttingProxy(redis_server)
    app = Minitask("orphan", broker=proxy.url)
    rec = app.task(name="rec")(lambda tag: tag)
    keys = QueueKeys("orphan", "default")
    try:
        rec.delay("warm")
        rec.delay("warm")  # the plain MULTI/EXEC path from now on
        admin.delete(keys.ready[4])
        admin.set(keys.ready[4], "foreign")  # priority 5's list, of another type
        held = admin.hlen(keys.messages)
        proxy.cut_reply_to(b"zorphan")
        with pytest.raises(BrokerError) as refused:
            rec.delay("zorphan")
        assert proxy.cuts == 1
        error = refused.value
        assert not error.sent, str(error)  # taken back: nothing enqueued, said so
        assert keys.ready[4] in str(error), str(error)  # the key named
        assert admin.hlen(keys.messages) == held  # no message left that no fetch reaches
        assert admin.get(keys.ready[4]) == b"foreign"  # someone's data, left alone
        admin.delete(keys.ready[4])
        handle = rec.delay("after")  # the key fixed: sends go on
        assert handle.status() == "queued"
    finally:
        app.close()
        proxy.close()
