"""The ACL check before a client's first send (broker/acl_check.py), review 29m:

* a broadcast refused part way through broadcast_send (its HSET revoked after the check)
  advised a resend with its ``task_id=``, which sends nothing, and told to check with
  ``app.handle(id)``, which knows no broadcast call;
* a process that never sends called the check's function at every script run;
* a check that passed while another thread met a refusal part way (the ACL changed)
  set the flag off again: the next send was not checked again.

On test-owned redis-servers with ACL users.
"""
from __future__ import annotations

import time
from typing import Any, List

import pytest
import redis

import minitask.broker.acl_check as acl_check
import minitask.broker.transport as transport_module
from minitask import BrokerError, Minitask
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import has_acl_check, user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

USER = "refsender"


def test_a_broadcast_refused_part_way_names_its_handle_and_a_new_id(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = Minitask("aclbcast", broker=user_without(admin, server, user=USER))

    @app.task(name="tick", broadcast=True, queue="news")
    def tick(n: int) -> int:
        return n
    try:
        app.broker.broadcasts.subscribe("news", "w1", int(time.time() * 1000))
        tick.delay(0)  # the check passes (or 6.2: nothing to ask)
        admin.execute_command("ACL", "SETUSER", USER, "-hset")  # changed after the check
        with pytest.raises(BrokerError) as refused:
            tick.apply_async((1,), task_id="bc-1")
        error, said = refused.value, str(refused.value)
        assert error.sent and error.part_way and error.task_ids == ["bc-1"], said
        assert "task_id='bc-1'" not in said, said  # no resend by its id: it sends nothing
        assert "never sends a call twice" not in said, said
        assert "app.handle(id).status()" not in said, said  # it knows no broadcast call
        assert "BroadcastHandle(app.broker, 'news', 'bc-1').status()" in said, said
        assert "under a new id" in said and "logged and sends nothing" in said, said
        admin.execute_command("ACL", "SETUSER", USER, "+hset")
        tick.apply_async((1,), task_id="bc-2")  # under a new id: sent
    finally:
        app.close()


def test_a_process_that_never_sends_never_calls_the_check(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    called: List[Any] = []
    monkeypatch.setattr(transport_module, "check_sender",
                        lambda *args: called.append(args))
    app = Minitask("aclnosend", broker=user_without(admin, server, user=USER))
    try:
        app.broker.broadcasts.subscribe("news", "w1", int(time.time() * 1000))  # run()
        assert app.handle("nope-1").cancel() is False  # run_calls()
        assert app.broker.transport.acl_unchecked  # never sent: never checked
        assert called == []
    finally:
        app.close()


def test_a_check_passing_while_another_thread_is_refused_part_way_is_asked_again(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not has_acl_check(admin):
        pytest.skip("Redis 6.2 cannot be asked (redis.acl_check_cmd)")
    app = Minitask("aclrace", broker=user_without(admin, server, user=USER))
    add = app.task(name="add")(lambda x: x)
    transport = app.broker.transport
    asked = acl_check.require_commands

    def passing_while_refused(*args: Any) -> None:
        asked(*args)  # passes; meanwhile another thread's send is refused part way
        transport.failure(redis.ResponseError("NOPERM ACL failure in script: this user "
                                              "has no permissions to run the 'del' "
                                              "command"), "enqueue", "enqueue")
    monkeypatch.setattr(acl_check, "require_commands", passing_while_refused)
    try:
        add.delay(0)
        monkeypatch.setattr(acl_check, "require_commands", asked)
        assert transport.acl_unchecked  # the refusal part way won: asked again
        admin.execute_command("ACL", "SETUSER", USER, "-del")
        with pytest.raises(BrokerError) as refused:
            add.apply_async((1,), task_id="race-1", delay=60)
        assert not refused.value.sent and "+del" in str(refused.value), str(refused.value)
    finally:
        app.close()
