"""A dead-lettering refused part way (an ACL changed while the worker runs: HSET or
ZADD taken away) leaves no dead letter without its reason: before, bury.lua added the
task to ``dead`` before it wrote ``dead_info``, so ``dead list`` showed it with an empty
reason and a ``dead requeue`` in that window was undone by the worker's retried bury."""
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


@pytest.mark.parametrize("refused", ["hset", "zadd"])
def test_a_refused_bury_shows_no_dead_letter_and_its_retry_records_it_whole(
        server: RedisServer, admin: Any, refused: str) -> None:
    app = Minitask("halfdead", broker=user_without(admin, server, "nothing"))
    app.task(name="job")(lambda n: n)
    k = QueueKeys("halfdead", "default")
    try:
        sent = app.tasks["job"].delay(1)
        now = app.clock.now_ms()
        leased = app.broker.queues.fetch("default", now_ms=now, lease_ms=30_000, count=1,
                                         max_deliveries=5).deliveries
        assert [d.task_id for d in leased] == [sent.id]
        died = Outcome("failed", now, exc_type="ValueError", message="boom")
        admin.execute_command("ACL", "SETUSER", "limited", f"-{refused}")
        with pytest.raises(BrokerError):
            app.broker.results.bury("default", sent.id, outcome=died, result_ttl_ms=0)
        # not visible as dead, still leased: what is left brings it back
        assert admin.zscore(k.dead, sent.id) is None
        assert admin.zscore(k.leases, sent.id) is not None
        admin.execute_command("ACL", "SETUSER", "limited", f"+{refused}")
        assert app.broker.results.bury("default", sent.id, outcome=died, result_ttl_ms=0)
        assert admin.zscore(k.dead, sent.id) is not None
        assert b"boom" in admin.hget(k.dead_info, sent.id)
        assert admin.zscore(k.leases, sent.id) is None
    finally:
        app.close()
