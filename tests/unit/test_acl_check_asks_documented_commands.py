"""The ACL check before a client's first send (broker/acl_check.py) asks about every
command the sending scripts call, and each is on the documented ACL list, so a user
set up as the docs say is never refused by it; the commands the docs make optional are
not asked about."""
from __future__ import annotations

from typing import Dict

from minitask.broker.acl_check import (CHECKED, OPTIONAL, asked_args, sender_commands,
                                       sending_key)
from minitask import Minitask
from minitask.stores.scripts import source
from tests.support.acl import documented_commands


def _sources() -> Dict[str, str]:
    shared = {"broadcast_send": "broadcast_lib"}
    return {name: source(name, shared=shared.get(name, "")) for name in CHECKED}


def test_every_command_asked_is_documented_and_none_optional() -> None:
    asked = asked_args(sender_commands(_sources()), "minitask:{a:q}:messages")
    assert asked[:2] == [1, "minitask:{a:q}:messages"]
    commands = list(sender_commands(_sources()))
    assert {"del", "zadd", "hsetnx", "rpush", "xadd"} <= set(commands)
    assert not set(commands) & OPTIONAL
    assert set(commands) <= set(documented_commands()), \
        sorted(set(commands) - set(documented_commands()))


def test_the_check_goes_where_the_first_sending_call_goes() -> None:
    fetch = ("fetch", "", ("minitask:{a:q}:ready",), [], 0)
    enqueue = ("enqueue", "", ("minitask:{a:q}:messages",), ["minitask:{a:q}:result:x"], 1)
    assert sending_key([fetch]) is None  # a worker's fetch: no check
    assert sending_key([fetch, enqueue]) == "minitask:{a:q}:messages"


def test_an_apps_transport_holds_every_sending_script_to_ask_about() -> None:
    """The check reads the transport's scripts: every script it asks about is among them, as
    it runs (a broadcast's with its shared library)."""
    app = Minitask("aclcheck", broker="redis://127.0.0.1:1/0")  # (never connects)
    try:
        sources = app.broker.transport.sources
        assert set(CHECKED) <= set(sources)
        assert asked_args(sender_commands(sources), "k") == \
            asked_args(sender_commands(_sources()), "k")
    finally:
        app.close()


#: Commands whose keys Redis finds by a count or keyword among the arguments, and
#: containers whose first argument is a subcommand (XGROUP CREATE): asked with the key
#: as each argument (broker/acl_arguments.py) they could be read wrong or refused
#: as unknown, so none may be asked about without a look at how it is asked.
_KEYS_BY_COUNT = {"zunionstore", "zinterstore", "zunion", "zinter", "zdiff", "zdiffstore",
                  "zintercard", "sintercard", "lmpop", "blmpop", "zmpop", "bzmpop", "eval",
                  "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "xread",
                  "xreadgroup", "sort", "sort_ro", "migrate", "georadius", "georadiusbymember",
                  "xgroup", "xinfo", "object", "client", "script", "config", "function",
                  "memory", "cluster", "acl", "command", "debug", "pubsub", "latency",
                  "module", "slowlog"}


def test_no_command_asked_finds_its_keys_by_a_count() -> None:
    assert not set(sender_commands(_sources())) & _KEYS_BY_COUNT
