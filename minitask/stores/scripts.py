"""Reading the stores' Lua scripts, shipped as package data in ``stores/lua``."""
from __future__ import annotations

import importlib.resources

#: Scripts that move due delayed tasks first: promote.lua's function goes in front.
_PROMOTING = frozenset({"enqueue", "fetch", "revive"})


def source(name: str) -> str:
    """The text of ``lua/<name>.lua``, with promote.lua in front where it is called."""
    folder = importlib.resources.files("minitask.stores") / "lua"
    text = (folder / f"{name}.lua").read_text("utf-8")
    if name in _PROMOTING:
        text = (folder / "promote.lua").read_text("utf-8") + text
    return text
