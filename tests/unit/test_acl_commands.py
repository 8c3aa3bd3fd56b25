"""The docs' ACL command list (docs/guide/scaling.rst) names every Redis command minitask sends.

The commands are read from the code: ``redis.call(...)``, ``redis.pcall(...)``
and lib.lua's wrappers ``must(kind, ...)`` and ``tolerant(instead, ...)`` in the
Lua scripts (ACLs check those too), redis-py methods called on the client or a pipeline,
and commands sent by name, in the modules producers, workers, handles and
``minitask status`` use. ``bench.py`` is left out: it runs as an administrator.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Set

import minitask
from tests.support.acl import documented_commands

PACKAGE = Path(minitask.__file__).resolve().parent
MODULES = ("broker/transport.py", "broker/connections.py", "broker/waits.py", "broker/health.py",
           "broker/cluster.py", "broker/cluster_sends.py", "broker/pools.py", "stores/aio.py",
           "handle.py", "app.py", "sending.py", "worker/pools/*.py",
           "worker/*.py", "cli/*.py", "stores/*.py")
#: redis-py method -> the command it sends, where the names differ
METHODS = {"delete": "del", "execute": "", "pipeline": "", "register_script": "",
           "close": "", "get_redis_connection": "", "aclose": "", "script_load": "script|load",
           "config_get": "config|get",
           # a cluster client's slot map (CLUSTER SLOTS, listed apart for Cluster in the docs)
           "initialize": "", "get_node_from_key": ""}
#: what redis-py sends on its own: scripts run by EVALSHA, loaded on NOSCRIPT;
#: health checks of idle connections
IMPLIED = {"evalsha", "script|load", "ping"}
#: a command named in a Lua script: redis.call/pcall, or lib.lua's wrappers
LUA_CALL = re.compile(r"(?:redis\.p?call\(|(?:must|tolerant)\([^,()]+, )'(\w+)'")
#: a command with subcommands a script calls: the one subcommand it sends (state.lua,
#: request_cancel.lua)
LUA_SUBCOMMANDS = {"memory": "memory|usage", "xinfo": "xinfo|stream"}


def used_commands() -> Set[str]:
    found = set(IMPLIED)
    for script in (PACKAGE / "stores" / "lua").glob("*.lua"):
        found |= {LUA_SUBCOMMANDS.get(name.lower(), name.lower())
                  for name in LUA_CALL.findall(script.read_text())}
    for path in (path for module in MODULES for path in sorted(PACKAGE.glob(module))):
        source = path.read_text()
        for method in re.findall(r"\b(?:client|pipe)\.(\w+)\(", source):
            found.add(METHODS.get(method, method))
        # send_command(...), and the broker's command(...) (packs one ahead of time)
        # and call(...) (sends one on the thread's own connection)
        sent = r'(?<!hooks\.)\b(?:send_command|command|call)\("(\w+)"(?:, "(\w+)")?'
        for command in re.findall(sent, source):
            name = command[0].lower()
            found.add(f"{name}|{command[1].lower()}" if name in ("script", "client") else name)
    found.discard("")
    return found


def test_the_docs_acl_lists_every_command_minitask_sends() -> None:
    missing = used_commands() - set(documented_commands())
    assert not missing, f"add to the ACL list in docs/guide/scaling.rst: {sorted(missing)}"


def test_the_docs_acl_lists_nothing_minitask_does_not_send() -> None:
    extra = set(documented_commands()) - used_commands()
    assert not extra, f"not sent by minitask, remove from docs/guide/scaling.rst: {sorted(extra)}"
