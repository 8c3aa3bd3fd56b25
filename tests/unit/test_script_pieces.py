"""scripts.source(): each script runs with the library definitions it uses, and only those."""
from __future__ import annotations

import importlib.resources
import re
from typing import Set

import pytest

from minitask.stores.scripts import pieces, source

LUA = importlib.resources.files("minitask.stores") / "lua"
SCRIPTS = sorted(path.name[:-4] for path in LUA.iterdir()
                 if path.name.endswith(".lua")
                 and path.name not in ("lib.lua", "promote.lua", "flow.lua"))
LIBRARIES = ("lib", "promote", "flow")


def _defined(text: str) -> Set[str]:
    return set(re.findall(r"^local (?:function )?(\w+)", text, re.M))


def test_the_pieces_are_the_libraries_cut_at_each_definition() -> None:
    for library in LIBRARIES:
        whole = (LUA / f"{library}.lua").read_text("utf-8")
        cut = pieces(library)
        assert "".join(text for _, text in cut) in whole  # only the header is left out
        assert whole.endswith("".join(text for _, text in cut))
        names = re.findall(r"^local (?:function )?(\w+)", whole, re.M)
        assert [name for name, _ in cut] == names
    assert [name for name, _ in pieces("lib")] == [
        "MAX_SCORE", "PLAIN_SOLO_CLAIM", "guarded", "guards", "tolerant", "put_back",
        "remember", "unless_other", "step_marker", "bounded_members"]
    assert [name for name, _ in pieces("flow")] == ["flow_made", "flow_control"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_gets_every_definition_it_uses_and_no_other(name: str) -> None:
    script = (LUA / f"{name}.lua").read_text("utf-8")
    ran = source(name)
    assert ran.endswith(script)
    front = ran[:-len(script)]
    library = {n for lib in LIBRARIES for n, _ in pieces(lib)}
    given = _defined(front) & library  # a feature's shared file comes whole
    words = set(re.findall(r"\w+", ran))
    used = {n for n in library if n in set(re.findall(r"\w+", script))}
    assert used <= given, f"{name}.lua uses {sorted(used - given)} that are not in front"
    texts = {n: text for lib in LIBRARIES for n, text in pieces(lib)}
    for piece in given:  # each one given is used by the script or by another part in front
        others = ran.replace(texts[piece], "", 1)
        assert piece in set(re.findall(r"\w+", others)), f"{piece} is given to {name}.lua unused"
    assert words  # the text was read


def _made_per_call(text: str) -> Set[str]:
    """The functions a script's text makes at every call: those defined at its top
    level, not inside another function (Lua makes a closure when its definition runs)."""
    return set(re.findall(r"^local function (\w+)", text, re.M))


def test_the_hot_scripts_make_no_guard_or_flow_function_unless_they_need_one() -> None:
    cold = {"foreign", "must", "expect", "band_of", "bump", "utf8", "flow_number", "flow_spec",
            "flow_admit", "flow_free", "flow_end"}
    for name in ("fetch", "ack", "ack_fetch", "enqueue"):
        assert _made_per_call(source(name)) & cold == set(), name
        assert "local function guards()" in source(name)  # made at their first use
    assert _made_per_call(source("ack")) == {"guards", "tolerant", "flow_control"}
    assert {"due_batch", "promote", "tolerant", "guards"} <= _made_per_call(source("enqueue"))


def test_flow_definitions_go_only_to_the_scripts_that_use_them() -> None:
    flow = {name for name, _ in pieces("flow")}
    assert _defined(source("ack")) & flow == flow
    assert flow <= _defined(source("fetch"))
    assert _defined(source("enqueue_flow")) & flow == set()  # it reads specs itself
    assert flow <= _defined(source("enqueue_group"))  # a grouped call joins its group
    assert "flow_control" not in source("enqueue_now")
