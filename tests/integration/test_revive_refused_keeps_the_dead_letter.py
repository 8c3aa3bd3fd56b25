"""A ``requeue_dead`` refused part way (an ACL changed since: RPUSH taken away) keeps
the dead letter: before, revive.lua took the task out of ``dead`` first, and a refused
push to its ready list then left it nowhere (lost: not dead, not queued). Checked with
the ACL fixed: the same requeue queues it once."""
from __future__ import annotations

from typing import Any

import pytest

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_refused_requeue_leaves_the_task_dead_and_a_later_one_queues_it_once(
        server: RedisServer, admin: Any) -> None:
    app = Minitask("revived", broker=user_without(admin, server, "nothing"))
    app.task(name="job")(lambda n: n)
    k = QueueKeys("revived", "default")
    try:
        sent = app.tasks["job"].delay(1)
        now = app.clock.now_ms()
        app.broker.queues.fetch("default", now_ms=now, lease_ms=30_000, count=1,
                                max_deliveries=5)
        assert app.broker.results.bury("default", sent.id, result_ttl_ms=0,
                                       outcome=Outcome("failed", now, exc_type="ValueError"))
        admin.execute_command("ACL", "SETUSER", "limited", "-rpush")
        with pytest.raises(BrokerError):
            app.requeue_dead(sent.id)
        assert admin.zscore(k.dead, sent.id) is not None  # still a dead letter
        assert admin.hget(k.dead_info, sent.id)
        admin.execute_command("ACL", "SETUSER", "limited", "+rpush")
        assert app.requeue_dead(sent.id)
        assert admin.zscore(k.dead, sent.id) is None
        queued = [admin.lrange(key, 0, -1) for key in k.ready]
        assert sum(ids.count(sent.id.encode()) for ids in queued) == 1
    finally:
        app.close()
