"""The ACL check asks about every command a sending script names, however it names it
(review 29m, item 5): a pattern of the calls (redis.call('X', must(kind, 'X', ...)
missed per_thousand('ZREM', ...), reads[kind], kind == 'list' and 'LLEN', and the
check never asked about flow.lua's LPUSH and SADD. Every quoted upper-case word of
every script is a command of the documented ACL list or one of acl_check.NOT_COMMANDS,
so no word the check reads as a command is an argument it would ask Redis about."""
from __future__ import annotations

import re
from typing import Dict, Set

import importlib.resources

from minitask.broker.acl_check import CHECKED, NOT_COMMANDS, commands_of, sender_commands
from minitask.stores.scripts import source
from tests.support.acl import documented_commands

_QUOTED = re.compile(r"'([A-Z][A-Z]+)'")


def _sources() -> Dict[str, str]:
    shared = {"broadcast_send": "broadcast_lib"}
    return {name: source(name, shared=shared.get(name, "")) for name in CHECKED}


def _every_script_text() -> str:
    folder = importlib.resources.files("minitask.stores") / "lua"
    return "".join(path.read_text("utf-8") for path in folder.iterdir()
                   if path.name.endswith(".lua"))


def _documented() -> Set[str]:
    """The documented commands, a container's (config|get) by its own name."""
    return {rule.split("|")[0] for rule in documented_commands()}


def test_the_commands_named_only_as_arguments_are_asked() -> None:
    asked = set(sender_commands(_sources()))
    assert {"lpush", "sadd", "zrem", "llen", "zcard", "hexists"} <= asked


def test_every_quoted_word_of_every_script_is_a_documented_command_or_no_command() -> None:
    words = {word.lower() for word in _QUOTED.findall(_every_script_text())}
    assert words - NOT_COMMANDS <= _documented(), sorted(words - NOT_COMMANDS - _documented())
    assert not NOT_COMMANDS & _documented()


def test_every_quoted_word_of_a_sending_script_is_asked_unless_no_command() -> None:
    words = {word.lower() for text in _sources().values() for word in _QUOTED.findall(text)}
    assert set(commands_of(_sources().values())) == words - NOT_COMMANDS
