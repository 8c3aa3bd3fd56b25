"""``cancel()`` of a workflow step not sent yet asks about every write before the first
(cancel_unsent.lua): the take-back of its outcome (a DEL, when the marker's HSET is
refused) was itself refused by an ACL without ``del``: the step's ``cancelled``
outcome stayed while nothing kept the step from being sent (its status read
cancelled, then it ran); a refused PEXPIRE left a marker and an outcome that never
expire. Now a refusal of any of them writes nothing: the step is sent and runs. Redis
7.0 and later are asked (``redis.acl_check_cmd``), 6.2 tries the take-back's commands
on the result, which does not exist. A test-owned redis-server; the ACL changes after
minitask's own check (patched to pass); the worker's part runs in this process."""
from __future__ import annotations

import time
from typing import Tuple

import pytest
import redis

from minitask import BrokerError, Minitask, chain
from minitask.broker import acl_check
from minitask.broker.keys import queue_keys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Bounds the worker's run of the chain.
DEADLINE = 30.0


def _app(url: str) -> Minitask:
    app = Minitask("unsentasks", broker=url)

    @app.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    return app


@pytest.mark.parametrize("refused", [("hset", "del"), ("pexpire",)])
def test_a_cancel_refused_at_any_write_writes_nothing_and_the_step_runs(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: Tuple[str, ...],
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = _app(server.url)
    last = chain(producer.tasks["double"].s(1), producer.tasks["double"].s()).delay()
    canceller = _app(user_without(admin, server, *refused))
    # the ACL changed after minitask's own check of it
    monkeypatch.setattr(acl_check, "require_commands", lambda *args: None)
    keys = queue_keys("unsentasks", "default")
    try:
        with pytest.raises(BrokerError) as raised:
            canceller.handle(last.id).cancel()
        assert raised.value.reason == "permission", str(raised.value)
        assert not admin.exists(keys.result(last.id)), "a cancelled outcome was left"
        assert admin.hget(keys.once(last.id), "state") is None
        assert last.status() != "cancelled"
        worker = producer.worker()
        deadline = time.monotonic() + DEADLINE
        while last.status() != "succeeded":
            assert time.monotonic() < deadline, f"the chain never ended: {last.status()}"
            worker.run_once()
        assert last.get(timeout=5) == 4
    finally:
        canceller.close()
        producer.close()
