"""Reading the stores' Lua scripts, shipped as package data in ``stores/lua``."""
from __future__ import annotations

import importlib.resources

#: Scripts that move due delayed tasks first: promote.lua's functions go in front.
_PROMOTING = frozenset({"enqueue", "fetch", "revive", "spawn", "schedule_fire"})


def source(name: str, *, shared: str = "") -> str:
    """The text of ``lua/<name>.lua`` as it is run: lib.lua in front, and promote.lua
    after it where the script calls it, or ``lua/<shared>.lua`` if given (the
    functions of one feature's scripts)."""
    folder = importlib.resources.files("minitask.stores") / "lua"
    names = ["lib", "promote", name] if name in _PROMOTING else ["lib", name]
    if shared:
        names.insert(1, shared)
    return "".join((folder / f"{part}.lua").read_text("utf-8") for part in names)
