"""The ACL rules the docs give for minitask's Redis user; ACL users that may run every
command but one, on a test's own redis-server (``server``, ``admin``), and the app the
refusal tests send with (``refused_app``)."""
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


def user_without(admin: "redis.Redis[bytes]", server: RedisServer, command: str) -> str:
    """The URL of an ACL user who may run every command but ``command`` (``nothing``:
    every command, to take one away later)."""
    admin.execute_command("ACL", "SETUSER", "limited", "reset", "on", ">pw", "~*", "&*",
                          "+@all", *([f"-{command}"] if command != "nothing" else []))
    return f"redis://limited:pw@127.0.0.1:{server.port}/0"


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
