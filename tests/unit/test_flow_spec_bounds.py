"""flow.lua reads a spec's numbers up to the most minitask writes (limits.py): a number
beyond them is no spec of minitask's (tests/integration/test_flow_spec_beyond_range.py).
The bounds are written twice, in Python and in Lua: they must agree."""
from __future__ import annotations

import re
from pathlib import Path

from minitask import limits
from minitask.wire.message import MAX_MS

FLOW_LUA = Path(limits.__file__).parent / "stores" / "lua" / "flow.lua"


def test_flow_lua_reads_the_numbers_limits_py_writes() -> None:
    found = re.search(r"local FLOW_MOST, FLOW_WINDOW, FLOW_EXPIRES = (\d+), (\d+), (\d+)\n",
                      FLOW_LUA.read_text("utf-8"))
    assert found is not None
    most, window, expires = (int(group) for group in found.groups())
    assert most == limits.MAX_COUNT
    assert window == max(limits._WINDOW_MS.values())
    assert expires == MAX_MS
