"""The worker registry's reader tells an ACL refusal from data of another type: an ACL
without HSTRLEN (or without the worker records' keys) made every worker record read
as "it holds another type than a hash", left out with a log line blaming the data,
and ``minitask status`` listed no worker. Now the read fails as a permission error
naming the command, the key and the permission to grant (issue 29, a low finding)."""
from __future__ import annotations

import logging
from typing import List

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import AppKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import acl_user, documented_acl
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aclreg"


def _limited(admin: "redis.Redis[bytes]", server: RedisServer, rules: List[str]) -> Minitask:
    return Minitask(APP, broker=acl_user(admin, server, "limited", *rules))


def _plant_worker(server: RedisServer, now_ms: int) -> None:
    owner = Minitask(APP, broker=server.url)
    try:
        owner.broker.registry.heartbeat("w1", {"queues": "default", "beat_ms": now_ms},
                                        now_ms, ttl_ms=60_000)
    finally:
        owner.close()


@pytest.mark.parametrize("case", ["no HSTRLEN", "no worker keys"])
def test_an_acl_refusal_is_a_permission_error_naming_command_and_key(
        admin: "redis.Redis[bytes]", server: RedisServer, case: str,
        caplog: pytest.LogCaptureFixture) -> None:
    rules = [rule for rule in documented_acl() if rule != "+hstrlen"]
    if case == "no worker keys":  # every key but the workers' records
        rules = [*(rule for rule in documented_acl() if rule != "~minitask:*"),
                 f"~{AppKeys(APP).workers}", f"~minitask:{{{APP}}}:q*"]
    now_ms = int(admin.time()[0]) * 1000
    _plant_worker(server, now_ms)
    app = _limited(admin, server, rules)
    try:
        with caplog.at_level(logging.INFO), pytest.raises(BrokerError) as caught:
            app.broker.registry.listing(now_ms, 60_000)
    finally:
        app.close()
    said = str(caught.value)
    assert caught.value.reason == "permission", said
    assert AppKeys(APP).worker("w1") in said, said
    assert ("HSTRLEN" in said and "+hstrlen" in said) if case == "no HSTRLEN" \
        else ("EXISTS" in said and "~minitask:*" in said), said
    assert "another type" not in caplog.text and "another type" not in said


def test_the_broadcast_subscribers_read_tells_a_refusal_from_another_type(
        admin: "redis.Redis[bytes]", server: RedisServer,
        caplog: pytest.LogCaptureFixture) -> None:
    """The same for the readers of a queue's subscribers (``minitask status``'s)."""
    # (the reads measure each value first, HSTRLEN, and page the cursors by HSCAN)
    rules = [rule for rule in documented_acl() if rule not in ("+hstrlen", "+hscan")]
    app = _limited(admin, server, rules)
    try:
        for read in (lambda: app.broker.broadcasts.cursors("fan"),
                     lambda: app.broker.broadcasts.of("fan", [b"s1"])):
            with caplog.at_level(logging.INFO), pytest.raises(BrokerError) as caught:
                read()
            assert caught.value.reason == "permission", str(caught.value)
    finally:
        app.close()
    assert "another type" not in caplog.text
