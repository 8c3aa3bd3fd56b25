"""The ACL rules the docs give for minitask's Redis user; ACL users (``acl_user``, and
``user_without``: every command but those named) on a test's own redis-server
(``server``, ``admin``: import ``own_server``, ``own_admin``), whether it can be asked
about them (``has_acl_check``), and the app the refusal tests send with
(``refused_app``)."""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker import acl_check
from tests.support.paths import ROOT
from tests.support.servers import RedisServer


def documented_acl() -> List[str]:
    """The ``ACL SETUSER minitask ...`` rules the docs document, password left out."""
    readme = (ROOT / "docs" / "guide" / "scaling.rst").read_text()
    start = readme.index("   ACL SETUSER minitask ")
    block = readme[start:readme.index("\n\n", start)]
    rules = block.split()[3:]
    return [rule for rule in rules if not rule.startswith(">")]


def documented_commands() -> List[str]:
    return [rule[1:] for rule in documented_acl() if rule.startswith("+")]


@pytest.fixture(name="server")
def own_server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()  # this test's own: ACL users, planted keys


@pytest.fixture(name="admin")
def own_admin(server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    client = server.client()
    try:
        yield client
    finally:
        client.close()


def refused_app(name: str, url: str, **options: Any) -> Tuple[Minitask, Any, Any]:
    """App ``name`` on ``url``: ``add`` on the default queue, ``other`` on queue "other"."""
    app = Minitask(name, broker=url, **options)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task(name="other", queue="other")
    def other(x: Any) -> Any:
        return x
    return app, add, other


def redis_major(admin: "redis.Redis[bytes]") -> int:
    """The major version of the server ``admin`` is a client of (Valkey's own)."""
    info = admin.info("server")
    return int(str(info.get("valkey_version") or info["redis_version"]).split(".")[0])


def has_acl_check(admin: "redis.Redis[bytes]") -> bool:
    """Whether the server can be asked (redis.acl_check_cmd: Redis 7.0 and later)."""
    return redis_major(admin) >= 7


def acl_user(admin: "redis.Redis[bytes]", server: RedisServer, user: str, *rules: str) -> str:
    """The URL of ACL user ``user`` (password "pw"), set afresh with ``rules``."""
    admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", *rules)
    return f"redis://{user}:pw@127.0.0.1:{server.port}/0"


def user_without(admin: "redis.Redis[bytes]", server: RedisServer, *commands: str,
                 user: str = "limited") -> str:
    """The URL of an ACL user who may run every command but ``commands`` (``nothing``,
    or none: every command, to take one away later)."""
    return acl_user(admin, server, user, "~*", "&*", "+@all",
                    *(f"-{command}" for command in commands if command != "nothing"))


def allowed_only_for_the_check(monkeypatch: Any, admin: Any, user: str, command: str) -> None:
    """Let ``user`` run ``command`` during each ACL check before a send (acl_check.py,
    blocking and asyncio), never after: a refusal of it then comes after the check passed,
    as after an ACL changed since (a registry's SADD refused after the block's write;
    the check asks about SADD, which flow.lua calls)."""
    blocking, asynchronous = acl_check.require_commands, acl_check.arequire_commands

    def allow(sign: str) -> None:
        admin.execute_command("ACL", "SETUSER", user, f"{sign}{command}")

    def checked(*args: Any) -> None:
        allow("+")
        try:
            blocking(*args)
        finally:
            allow("-")

    async def achecked(*args: Any) -> None:
        allow("+")
        try:
            await asynchronous(*args)
        finally:
            allow("-")
    monkeypatch.setattr(acl_check, "require_commands", checked)
    monkeypatch.setattr(acl_check, "arequire_commands", achecked)
