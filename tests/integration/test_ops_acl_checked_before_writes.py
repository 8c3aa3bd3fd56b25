"""The ops commands that write (``purge``, ``dead requeue``, ``dead purge``, ``cancel``)
ask Redis first whether their ACL user may run every command of the scripts they run,
and one missing any exits 2 naming it and its +rule, having written nothing (issue 29:
Redis refused the command part way through the script, after its first writes, exit 3).
With the ACL fixed the same command does its work. On a test-owned redis-server (7.0
and later: 6.2 cannot be asked, and the command goes on as before).
"""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli import cancel as cancel_command
from minitask.cli import dead as dead_command
from minitask.cli import purge as purge_command
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message
from tests.support.cli import operate_with, run
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aclops"
USER = "operator"
DIED_MS = 1_700_000_000_000


def _app(url: str) -> Minitask:
    app = Minitask(APP, broker=url)
    app.task(name="add")(lambda x, y=0: x + y)
    return app


def _snapshot(admin: "redis.Redis[bytes]") -> Dict[bytes, Any]:
    return {key: admin.dump(key) for key in sorted(admin.keys("*"))}


def _dead(admin: "redis.Redis[bytes]") -> List[bytes]:
    return admin.zrange(queue_keys(APP, "default").dead, 0, -1)


COMMANDS = {
    "purge": (["purge", "-A", "x", "default", "--yes"],
              lambda admin, app: app.handle("p-1").status() == "unknown"),
    "dead requeue": (["dead", "-A", "x", "requeue", "d-1"],
                     lambda admin, app: _dead(admin) == []),
    "dead purge": (["dead", "-A", "x", "purge", "d-1"],
                   lambda admin, app: _dead(admin) == []),
    "cancel": (["cancel", "-A", "x", "p-1"],
               lambda admin, app: app.handle("p-1").status() == "cancelled"),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_an_ops_command_whose_user_lacks_a_command_writes_nothing_and_says_so(
        server: RedisServer, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], name: str) -> None:
    info = admin.info("server")
    if int(str(info.get("valkey_version") or info["redis_version"]).split(".")[0]) < 7:
        pytest.skip("Redis 6.2 cannot be asked (redis.acl_check_cmd)")
    producer = _app(server.url)
    producer.tasks["add"].apply_async((1,), task_id="p-1")
    producer.close()
    keys = queue_keys(APP, "default")
    admin.sadd(AppKeys(APP).queues, b"default")
    admin.zadd(keys.dead, {"d-1": DIED_MS})
    admin.hset(keys.messages, "d-1", encode_message(
        Message("d-1", "add", [1, 2], {}, "default", 0, DIED_MS)))
    app = _app(user_without(admin, server, "xadd", user=USER))
    argv, done = COMMANDS[name]
    try:
        operate_with(app, monkeypatch, purge_command, dead_command, cancel_command)
        before = _snapshot(admin)
        code, said = run(capsys, *argv)
        assert code == 2, said
        assert "XADD" in said and "+xadd" in said and "nothing was written" in said, said
        assert _snapshot(admin) == before, said  # nothing half-written
        admin.execute_command("ACL", "SETUSER", USER, "+xadd")  # the ACL fixed
        code, said = run(capsys, *argv)
        assert code == 0, said
        assert done(admin, app), said
    finally:
        app.broker.close()
