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

from typing import Tuple

import pytest
import redis

from minitask import chain
from minitask.broker import acl_check
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_cancels import (
    cancel_app, no_cancel_left, refused_cancel, run_until_succeeded)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("refused", [("hset", "del"), ("pexpire",)])
def test_a_cancel_refused_at_any_write_writes_nothing_and_the_step_runs(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: Tuple[str, ...],
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = cancel_app("unsentasks", server.url)
    last = chain(producer.tasks["double"].s(1), producer.tasks["double"].s()).delay()
    canceller = cancel_app("unsentasks", user_without(admin, server, *refused))
    # the ACL changed after minitask's own check of it
    monkeypatch.setattr(acl_check, "require_commands", lambda *args: None)
    try:
        error = refused_cancel(canceller, last.id)
        assert error.reason == "permission", str(error)
        no_cancel_left(admin, producer, last.id)
        assert last.status() != "cancelled"
        run_until_succeeded(producer, last, "the chain never ended")
        assert last.get(timeout=5) == 4
    finally:
        canceller.close()
        producer.close()
