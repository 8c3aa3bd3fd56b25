"""A refusal in a pipeline read (an ACL, a full Redis) comes out as a BrokerError
naming what failed, with its hint, never as redis-py's own exception (review 13: the
refusals were raised after the ``errors()`` block that names them)."""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import AppKeys
from minitask.stores.names import registered

DENIED = redis.exceptions.NoPermissionError(
    "this user has no permissions to run the 'sismember' command")


def deny_pipelines(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pipeline of ``app``'s client answers each command with ``DENIED``."""
    client = app.broker.transport.client
    made = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = made(*args, **kwargs)
        monkeypatch.setattr(pipe, "execute", lambda raise_on_error=True: [DENIED] * 3)
        return pipe
    monkeypatch.setattr(client, "pipeline", pipeline)


READS: Dict[str, Callable[[Minitask], Any]] = {
    "registered": lambda app: registered(app.broker.transport, [AppKeys(app.name).queues], "q"),
    "find_queue": lambda app: app.broker.results.find_queue("x", ["a", "b"]),
    "dead sizes": lambda app: app.broker.dead.sizes(["a"]),
    "dead find": lambda app: app.broker.dead.find(["a"], [b"x"]),
    "dead letter": lambda app: app.broker.dead.letter("a", b"x"),
    # (workflow_of reads through a script now, hash_fields.lua: an ACL refusal in it
    # is tried on a real server in tests/integration/test_planted_values_huge.py)
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_refused_pipeline_read_is_a_broker_error(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, read: str) -> None:
    deny_pipelines(app, monkeypatch)
    with pytest.raises(BrokerError) as caught:
        READS[read](app)
    assert "permission" in str(caught.value).lower() or "acl" in str(caught.value).lower()
