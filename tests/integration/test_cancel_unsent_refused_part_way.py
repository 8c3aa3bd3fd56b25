"""``cancel()`` of a workflow step not sent yet, a write of it refused by Redis (an
ACL changed while the producer runs): Redis keeps the writes a script made before a
refused command, so the outcome goes first and a refused marker takes it back (a
refused RPUSH had left the marker saying cancelled with no outcome: the step never
sent, its get() waiting for ever); the step is as it was: no cancelled outcome the
step's run would contradict, no marker that would keep it from being sent; run, the
chain ends with its own result. A test-owned redis-server; the worker's part runs in
this process."""
from __future__ import annotations

import time

import pytest
import redis

from minitask import BrokerError, Minitask, chain
from minitask.broker.keys import queue_keys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import allowed_only_for_the_check, user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Bounds the worker's run of the chain.
DEADLINE = 30.0


def _app(url: str) -> Minitask:
    app = Minitask("unsentrefused", broker=url)

    @app.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    return app


@pytest.mark.parametrize("refused", ["hset", "rpush"])
def test_a_refused_cancel_of_a_step_not_sent_leaves_it_to_be_sent(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = _app(server.url)
    double = producer.tasks["double"]
    last = chain(double.s(1), double.s()).delay()
    canceller = _app(user_without(admin, server, refused))
    allowed_only_for_the_check(monkeypatch, admin, "limited", refused)
    keys = queue_keys("unsentrefused", "default")
    try:
        with pytest.raises(BrokerError):
            canceller.handle(last.id).cancel()
        assert not admin.exists(keys.result(last.id)), "a cancelled outcome was left"
        assert admin.hget(keys.once(last.id), "state") is None
        worker = producer.worker()
        deadline = time.monotonic() + DEADLINE
        while last.status() != "succeeded":
            assert time.monotonic() < deadline, f"the chain never ended: {last.status()}"
            worker.run_once()
        assert last.get(timeout=5) == 4
    finally:
        canceller.close()
        producer.close()
