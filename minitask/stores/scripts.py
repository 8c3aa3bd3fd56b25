"""Reading the stores' Lua scripts, shipped as package data in ``stores/lua``."""
from __future__ import annotations

import importlib.resources

#: Scripts that move due delayed tasks first: promote.lua's functions go in front.
_PROMOTING = frozenset({"enqueue", "fetch", "revive", "spawn", "schedule_fire"})


#: Scripts that hand out or end tasks: flow.lua's functions (flow control) go in front.
_FLOWING = frozenset({"fetch", "ack", "retry", "bury", "release"})


def source(name: str, *, shared: str = "") -> str:
    """The text of ``lua/<name>.lua`` as it is run: lib.lua in front, and promote.lua
    and flow.lua after it where the script calls them, or ``lua/<shared>.lua`` if
    given (the functions of one feature's scripts).

    ``enqueue_flow`` is enqueue.lua wrapped as a function, ``enqueue_base()``, that
    enqueue_flow.lua calls: the flow-controlled enqueue adds to the plain one, and
    never copies it.
    """
    folder = importlib.resources.files("minitask.stores") / "lua"

    def read(part: str) -> str:
        return (folder / f"{part}.lua").read_text("utf-8")

    if name == "enqueue_flow":
        return "".join((read("lib"), read("promote"), read("flow"),
                        "local function enqueue_base()\n", read("enqueue"), "\nend\n",
                        read("enqueue_flow")))
    names = ["lib", "promote"] if name in _PROMOTING else ["lib"]
    if name in _FLOWING:
        names.append("flow")
    if shared:
        names.append(shared)
    return "".join(read(part) for part in names + [name])
