"""``cancel()`` of a queued or scheduled task asks about its outcome's writes before
its first write, and writes the outcome before it withdraws the task (cancel.lua): an
ACL without ``rpush`` (changed after minitask's own check) refused the outcome after
the message was gone: the task was lost (no message, no outcome, status unknown); one
without ``pexpire`` left a cancelled outcome that never expires. Now either refusal
changes nothing: the task is where it was and runs. (An ACL refusing the result key
itself by pattern refuses the whole script before it starts: its keys are declared.)
Redis 7.0 and later are asked (``redis.acl_check_cmd``); 6.2 tries the PEXPIRE on
the result it deleted. A test-owned redis-server; the worker's part runs in this
process."""
from __future__ import annotations

import pytest
import redis

from minitask.broker import acl_check
from minitask.broker.keys import queue_keys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_cancels import cancel_app, refused_cancel, run_until_succeeded
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("refused", ["rpush", "pexpire"])
@pytest.mark.parametrize("state", ["queued", "scheduled"])
def test_a_cancel_refused_at_its_outcome_leaves_the_task_to_run(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: str, state: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = cancel_app("cancelasks", server.url)
    add = producer.tasks["add"]
    handle = add.delay(1, 2) if state == "queued" else add.apply_in(0.5, 1, 2)
    canceller = cancel_app("cancelasks", user_without(admin, server, refused))
    # the ACL changed after minitask's own check of it
    monkeypatch.setattr(acl_check, "require_commands", lambda *args: None)
    keys = queue_keys("cancelasks", "default")
    try:
        error = refused_cancel(canceller, handle.id)
        assert error.reason == "permission", str(error)
        assert admin.hexists(keys.messages, handle.id), "the task was lost"
        assert not admin.exists(keys.result(handle.id)), "an outcome was left"
        assert handle.status() == state
        run_until_succeeded(producer, handle, "the task never ran")
        assert handle.get(timeout=5) == 3
    finally:
        canceller.close()
        producer.close()
