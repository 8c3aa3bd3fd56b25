"""Reading the stores' Lua scripts, shipped as package data in ``stores/lua``.

lib.lua, promote.lua and flow.lua are libraries: a script is run with those of
their definitions it uses (and what those use) in front of it, not all of them. Redis
runs a script's whole text at every call, and each ``local function`` made is a
closure built and collected again: lib.lua whole cost an ack 4,500 Redis
instructions it mostly did not need. For the same reason the functions few calls
need (lib.lua's guards against data minitask did not write, flow.lua's flow
control) are made inside one function each, at its first call.
"""
from __future__ import annotations

import importlib.resources
import re
from functools import lru_cache
from typing import FrozenSet, List, Set, Tuple

#: Scripts that move due delayed tasks first: promote.lua's functions go in front (so
#: do they of a script composed from one of these).
_PROMOTING = frozenset({"enqueue", "fetch", "revive", "spawn", "schedule_fire"})
#: Scripts that add to others: each other script is put in front, whole, as a
#: function the script calls (its KEYS and ARGV as parameters, or the script's own).
_COMPOSED = {"enqueue_flow": (("enqueue_base()", "enqueue"),),
             "enqueue_group": (("enqueue_base()", "enqueue"),
                               ("enqueue_flow_base()", "enqueue_flow")),
             "ack_fetch": (("ack_base(KEYS, ARGV)", "ack"), ("fetch_base()", "fetch")),
             "spawn_flow": (("spawn_base()", "spawn"),),
             "spawn_group": (("spawn_base()", "spawn"), ("spawn_flow_base()", "spawn_flow"))}

#: A top-level definition of a library: ``local name =`` or ``local function name(``.
_DEFINITION = re.compile(r"local (?:function )?(\w+)")
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=None)
def _read(name: str) -> str:
    folder = importlib.resources.files("minitask.stores") / "lua"
    return (folder / f"{name}.lua").read_text("utf-8")


@lru_cache(maxsize=None)
def pieces(library: str) -> Tuple[Tuple[str, str], ...]:
    """A library's top-level definitions in file order, each as (name, text): from the
    comment lines right above its ``local`` line to the next definition's comment.

    The file's own header (before the first definition's comment) is left out:
    comments only.
    """
    lines = _read(library).splitlines(keepends=True)
    starts: List[Tuple[int, str]] = []
    for index, line in enumerate(lines):
        found = _DEFINITION.match(line)
        if found:
            first = index
            while first > 0 and lines[first - 1].startswith("--"):
                first -= 1
            starts.append((first, found.group(1)))
    ends = [first for first, _ in starts[1:]] + [len(lines)]
    return tuple((name, "".join(lines[first:end])) for (first, name), end in zip(starts, ends))


@lru_cache(maxsize=None)
def _words(text: str) -> FrozenSet[str]:
    """The words of a text: what a script or a definition may name."""
    return frozenset(_WORD.findall(text))


def _needed(library: str, words: Set[str]) -> List[str]:
    """The texts of ``library``'s definitions that ``words`` name, with those they use;
    ``words`` grows by the words of each one taken. A definition uses only earlier
    ones (Lua locals), so one pass from the end finds them all."""
    taken: List[str] = []
    for name, text in reversed(pieces(library)):
        if name in words:
            taken.append(text)
            words.update(_words(text))
    return taken[::-1]


@lru_cache(maxsize=None)
def source(name: str, *, shared: str = "") -> str:
    """The text of ``lua/<name>.lua`` as it is run: the definitions of lib.lua, of
    promote.lua and of flow.lua (flow control) that it uses, in that order, and
    ``lua/<shared>.lua`` if given (the functions of one feature's scripts), whole.

    A composed script has the scripts it adds to in front, each wrapped as a
    function it calls: ``enqueue_flow`` calls enqueue.lua as ``enqueue_base()``
    (the flow-controlled enqueue adds to the plain one), ``ack_fetch`` calls ack.lua
    as ``ack_base(KEYS, ARGV)`` and fetch.lua as ``fetch_base()``. None copies another.
    """
    parts = _COMPOSED.get(name, ())
    script = "".join(f"local function {function}\n{_read(part)}\nend\n"
                     for function, part in parts) + _read(name)
    whole = [_read(shared)] if shared else []
    words = set(_words("".join(whole) + script))
    promoting = name in _PROMOTING or any(part in _PROMOTING for _, part in parts)
    # each library may use those after it in this list, never one before
    libraries = ["flow", "promote", "lib"] if promoting else ["flow", "lib"]
    taken = {library: _needed(library, words) for library in libraries}
    return "".join(taken["lib"] + taken.get("promote", []) + taken["flow"] + whole
                   + [script])
