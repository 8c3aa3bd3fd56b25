"""The ACL rules the docs give for minitask's Redis user."""
from __future__ import annotations

from typing import Any, List

from tests.support.paths import ROOT


def documented_acl() -> List[str]:
    """The ``ACL SETUSER minitask ...`` rules the docs document, password left out."""
    readme = (ROOT / "docs" / "guide" / "scaling.rst").read_text()
    start = readme.index("   ACL SETUSER minitask ")
    block = readme[start:readme.index("\n\n", start)]
    rules = block.split()[3:]
    return [rule for rule in rules if not rule.startswith(">")]


def documented_commands() -> List[str]:
    return [rule[1:] for rule in documented_acl() if rule.startswith("+")]


def allowed_only_for_the_check(monkeypatch: Any, admin: Any, user: str, command: str) -> None:
    """Let ``user`` run ``command`` during each ACL check before a send (acl_check.py,
    blocking and asyncio), never after: a refusal of it then comes after the check passed,
    as after an ACL changed since (a registry's SADD refused after the block's write;
    the check asks about SADD, which flow.lua calls)."""
    from minitask.broker import acl_check

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
