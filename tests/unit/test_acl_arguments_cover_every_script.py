"""Every command of every script that an ACL check may ask about has its count of
arguments (broker/acl_arguments.py): one missing would fail the check with a KeyError.
The table lists no command that no script calls. (The counts against each server's
COMMAND INFO: tests/integration/test_acl_check_asks_within_arity.py.)"""
from __future__ import annotations

import importlib.resources
from typing import Set

from minitask.broker.acl_arguments import ARGUMENT_COUNTS, with_the_key
from minitask.broker.acl_check import WORKER_OPTIONAL, commands_of


def _every_script_command() -> Set[str]:
    folder = importlib.resources.files("minitask.stores") / "lua"
    return set(commands_of(path.read_text("utf-8") for path in folder.iterdir()
                           if path.name.endswith(".lua")))


def test_every_asked_command_of_every_script_has_its_count() -> None:
    commands = _every_script_command()
    missing = {name for name in commands if name not in WORKER_OPTIONAL} - set(ARGUMENT_COUNTS)
    assert not missing, sorted(missing)
    assert set(ARGUMENT_COUNTS) <= commands, sorted(set(ARGUMENT_COUNTS) - commands)


def test_a_command_is_asked_with_the_key_as_each_of_its_arguments() -> None:
    assert with_the_key("get") == ("",)
    assert with_the_key("xadd") == ("", "", "", "")
    assert with_the_key("time") == ()
