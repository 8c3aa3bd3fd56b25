"""Every script, with only the library definitions it uses in front, loads on a real
redis-server (a definition missing or cut wrong would not compile or would fail
at its first call: the stores' own tests run each one)."""
from __future__ import annotations

import importlib.resources

import pytest

from minitask.stores.scripts import source
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

LUA = importlib.resources.files("minitask.stores") / "lua"


def test_every_script_loads(redis_server: RedisServer) -> None:
    client = redis_server.client()
    names = sorted(path.name[:-4] for path in LUA.iterdir() if path.name.endswith(".lua")
                   and path.name not in ("lib.lua", "promote.lua"))
    try:
        for name in names:
            sha = client.script_load(source(name))
            assert client.script_exists(sha) == [True], name
    finally:
        client.close()
    assert len(names) >= 20
