"""The asyncio pool's loop round trips (worker/loop_acks.py) without hiredis, which is
optional (the ``hiredis`` extra): the suite installs it, so a test that wants
redis-py's own parser hides it."""
from __future__ import annotations

import builtins
from typing import Any, Dict, Optional, Tuple

import pytest
from redis._parsers import _AsyncRESP2Parser

from minitask.stores.aio import twin_of
from minitask.worker import loop_acks

#: "hiredis": the loop parses replies with hiredis itself; "redis-py": hiredis hidden,
#: redis-py's ``read_response`` on its pure-Python parser reads them
PARSERS = ("hiredis", "redis-py")


def use_parser(monkeypatch: pytest.MonkeyPatch, parser: str) -> None:
    """Make the loop's connections made from now on read with ``parser``: without
    hiredis, on redis-py's pure-Python parser too (redis-py's own default is hiredis
    where it is installed)."""
    if parser == "hiredis":
        pytest.importorskip("hiredis")
        return
    importing = builtins.__import__

    def not_installed(name: str, scope: Any = None, *args: Any, **kwargs: Any) -> Any:
        # hidden from loop_acks alone: redis-py imports hiredis for each connection of
        # its own (the app's, on other threads), which must not fail meanwhile
        if name == "hiredis" and (scope or {}).get("__name__") == loop_acks.__name__:
            raise ModuleNotFoundError("No module named 'hiredis'", name="hiredis")
        return importing(name, scope, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", not_installed)

    def pure_python(client: Any) -> Optional[Tuple[Any, Dict[str, Any]]]:
        mirrored = twin_of(client)
        if mirrored is None:
            return None
        return mirrored[0], dict(mirrored[1], parser_class=_AsyncRESP2Parser)

    monkeypatch.setattr(loop_acks, "twin_of", pure_python)


def pack(*args: bytes) -> bytes:
    """One command in Redis's protocol."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)
