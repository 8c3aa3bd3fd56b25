"""lib.lua's ``guards().refused`` and Python's ``_REFUSED_IN_SCRIPT`` (broker/refusals.py)
know the same wordings of an ACL's refusal of a command a script called.

Each version words one its own way (6.2 and 7.0: "The user executing the script can't
...", 7.2 on and Valkey: "ACL failure in script: ..."); a wording one side knows and the
other does not is a refusal the script takes for another failure (or the reverse).
Both lists are read from their sources: a phrase added to one only fails here.
"""
from __future__ import annotations

import importlib.resources
import re
from typing import Dict, FrozenSet, List

from minitask.broker import refusals

LIB = importlib.resources.files("minitask.stores") / "lua" / "lib.lua"

#: Every wording of a refusal inside a script, as a redis.pcall's ``err`` reads it (seen
#: on 6.2.14, 7.0.15, 8.2 and Valkey 9.1: the servers of make test-redis) and as
#: redis-py's error of a script says it: commands, keys and channels, each version.
#: (string.find and ``in`` look anywhere: "ERR " in front or not.)
IN_SCRIPT: Dict[str, str] = {
    "6.2 command": ("@user_script: 1: The user executing the script can't run this command "
                    "or subcommand"),
    "6.2 key": ("@user_script: 1: The user executing the script can't access at least one "
                "of the keys mentioned in the command arguments"),
    "6.2 channel": ("@user_script: 1: The user executing the script can't publish to the "
                    "channel mentioned in the command"),
    "6.2 as redis-py says it": (
        "Error running script (call to f_" + "0" * 40 + "): @user_script:1: @user_script: 1: "
        "The user executing the script can't run this command or subcommand"),
    "7.0 command": "ERR The user executing the script can't run this command or subcommand",
    "7.0 key": ("ERR The user executing the script can't access at least one of the keys "
                "mentioned in the command arguments"),
    "7.0 channel": ("ERR The user executing the script can't publish to the channel "
                    "mentioned in the command"),
    "7.0 as redis-py says it": (
        "The user executing the script can't run this command or subcommand script: "
        + "0" * 40 + ", on @user_script:1."),
    "8 and Valkey 9 command": ("ERR ACL failure in script: User limited has no permissions "
                               "to run the 'incrby' command"),
    "8 and Valkey 9 key": "ERR ACL failure in script: No permissions to access a key",
    "8 and Valkey 9 channel": "ERR ACL failure in script: No permissions to access a channel",
    "8 and Valkey 9 as redis-py says it": (
        "ACL failure in script: User limited has no permissions to run the 'rpush' "
        "command script: " + "0" * 40 + ", on @user_script:9."),
}
#: Not refusals: what the same calls' other errors say (a script's guards tell these apart).
OTHER = ("WRONGTYPE Operation against a key holding the wrong kind of value",
         "ERR value is not an integer or out of range",
         "ERR increment or decrement would overflow",
         "ERR Error running script: @user_script:3: user_script:3: Script attempted to "
         "access nonexistent global variable 'x'")
#: Lua's refused() knows NOPERM too: Redis words a refusal outside a script so (and
#: writable() raises its own so), which Python's describe() tells by "NOPERM" in text.
OUTSIDE_SCRIPT = "NOPERM this user has no permissions to run the 'rpush' command"


def _lua_phrases() -> List[str]:
    """The phrases lib.lua's refused() looks for, read from its body (plain finds only)."""
    text = LIB.read_text("utf-8")
    body = re.search(r"local function refused\(reply\)\n(.*?)\n  end\n", text, re.S)
    assert body, "lib.lua has no refused(reply) in guards()"
    finds = re.findall(r"string\.find\(err, '([^']*)'(, 1, true)?\)", body.group(1))
    assert finds and len(finds) == body.group(1).count("string.find")
    assert all(plain for _, plain in finds), "refused() finds a pattern, not a plain phrase"
    return [phrase for phrase, _ in finds]


def _matched(phrase: str) -> FrozenSet[str]:
    return frozenset(name for name, wording in IN_SCRIPT.items() if phrase in wording)


def test_each_side_knows_every_wording_of_a_refusal_inside_a_script() -> None:
    lua, python = _lua_phrases(), list(refusals._REFUSED_IN_SCRIPT)
    for name, wording in IN_SCRIPT.items():
        assert any(phrase in wording for phrase in lua), f"lib.lua's refused() misses {name}"
        assert any(phrase in wording for phrase in python), f"_REFUSED_IN_SCRIPT misses {name}"
        assert refusals.refused_in_script(Exception(wording[4:] if wording.startswith("ERR ")
                                                    else wording))


def test_neither_side_lists_a_phrase_the_other_lacks() -> None:
    lua, python = _lua_phrases(), list(refusals._REFUSED_IN_SCRIPT)
    extra = [phrase for phrase in lua if phrase in OUTSIDE_SCRIPT and not _matched(phrase)]
    assert extra == ["NOPERM"], f"lib.lua's refused() has {extra} for outside a script"
    assert '"NOPERM" in text' in (importlib.resources.files("minitask.broker")
                                  / "refusals.py").read_text("utf-8")
    lua_kinds = {_matched(phrase) for phrase in lua if phrase not in extra}
    python_kinds = {_matched(phrase) for phrase in python}
    assert frozenset() not in lua_kinds | python_kinds, "a phrase matches no wording"
    assert lua_kinds == python_kinds, (
        f"lib.lua's refused() {sorted(map(sorted, lua_kinds))} against _REFUSED_IN_SCRIPT "
        f"{sorted(map(sorted, python_kinds))}")
    assert len(lua) - len(extra) == len(python)


def test_no_phrase_takes_another_failure_for_a_refusal() -> None:
    for phrase in [*_lua_phrases(), *refusals._REFUSED_IN_SCRIPT]:
        assert not any(phrase in other for other in OTHER), phrase
    assert not any(refusals.refused_in_script(Exception(other)) for other in OTHER)
    assert not refusals.refused_in_script(Exception(OUTSIDE_SCRIPT))  # no part-way write
