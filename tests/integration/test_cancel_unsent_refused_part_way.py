"""``cancel()`` of a workflow step not sent yet, a write of it refused by Redis (an
ACL changed while the producer runs): Redis keeps the writes a script made before a
refused command, so the outcome goes first and a refused marker takes it back (a
refused RPUSH had left the marker saying cancelled with no outcome: the step never
sent, its get() waiting for ever); the step is as it was: no cancelled outcome the
step's run would contradict, no marker that would keep it from being sent; run, the
chain ends with its own result. A test-owned redis-server; the worker's part runs in
this process."""
from __future__ import annotations

import pytest
import redis

from minitask import chain
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import allowed_only_for_the_check, user_without
from tests.support.refused_cancels import (
    cancel_app, no_cancel_left, refused_cancel, run_until_succeeded)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("refused", ["hset", "rpush"])
def test_a_refused_cancel_of_a_step_not_sent_leaves_it_to_be_sent(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = cancel_app("unsentrefused", server.url)
    double = producer.tasks["double"]
    last = chain(double.s(1), double.s()).delay()
    canceller = cancel_app("unsentrefused", user_without(admin, server, refused))
    allowed_only_for_the_check(monkeypatch, admin, "limited", refused)
    try:
        refused_cancel(canceller, last.id)
        no_cancel_left(admin, producer, last.id)
        run_until_succeeded(producer, last, "the chain never ended")
        assert last.get(timeout=5) == 4
    finally:
        canceller.close()
        producer.close()
