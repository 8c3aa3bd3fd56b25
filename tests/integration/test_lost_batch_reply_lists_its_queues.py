"""An ``app.batch()`` block whose reply is lost lists its queues, as a plain send's does
(fixsend29c): its error names every task "may have been enqueued" and recommends
``app.handle(id).status()``, which asks the queues the app declares and those of its
registry; the block's queues were listed only when the write was cut part way, so a task
of a queue no task declares read ``unknown`` though it was queued. On a real
redis-server, the reply dropped by a proxy after the write ran."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_batch_whose_reply_is_lost_lists_its_queues(admin: "redis.Redis[bytes]",
                                                      redis_server: RedisServer) -> None:
    proxy = CuttingProxy(redis_server)
    app = Minitask("lostbatch", broker=proxy.url)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    try:
        t.delay("warm")  # connected, scripts loaded (queue "default" only)
        proxy.cut_reply_to(b"lost-batch-marker")
        with pytest.raises(BrokerError) as lost:
            with app.batch():
                first = t.apply_async(("lost-batch-marker",), queue="qa")
                second = t.apply_async(("b",), queue="qb")
        assert proxy.cuts == 1 and lost.value.sent, str(lost.value)
        assert lost.value.task_ids == [first.id, second.id]
        # (the write may or may not have reached Redis: the proxy closes as it cuts)
        listed = admin.smembers(app.broker.queues.app_keys.queues)
        assert {b"qa", b"qb"} <= listed  # (was: only "default")
        for handle, queue in ((first, "qa"), (second, "qb")):  # as Redis holds it
            written = admin.hexists(QueueKeys(app.name, queue).messages, handle.id)
            assert app.handle(handle.id).status() == ("queued" if written else "unknown")
    finally:
        app.close()
        proxy.close()
