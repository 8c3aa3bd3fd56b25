"""The bounds the scripts measure members by (promote.lua's ID_MOST and ENTRY_MOST, the
member page's) are those of the ids, group tokens and names minitask writes."""
from __future__ import annotations

import re

from minitask.limits import MAX_GROUP_LENGTH
from minitask.stores.scripts import _read
from minitask.wire.message import MAX_ID_BYTES


def lua_constant(script: str, name: str) -> int:
    found = re.search(rf"^local {name} = (\d+)$", _read(script), re.M)
    assert found, (script, name)
    return int(found.group(1))


def test_the_fetch_bounds_are_the_longest_id_and_token_minitask_writes() -> None:
    assert lua_constant("promote", "ID_MOST") == MAX_ID_BYTES
    # a group's token: 255, a generation (now '.' count: 20 digits each at most), '/',
    # a priority digit, the task's id, 255, the group (4 UTF-8 bytes a character)
    token = 1 + 20 + 1 + 20 + 1 + 1 + MAX_ID_BYTES + 1 + 4 * MAX_GROUP_LENGTH
    assert token <= lua_constant("promote", "ENTRY_MOST") < 2 * token


def test_the_tick_bound_is_the_longest_schedule_name() -> None:
    from minitask.periodic import MAX_NAME_BYTES
    assert lua_constant("schedule_armed", "NAME_MOST") == MAX_NAME_BYTES
    assert lua_constant("schedule_page", "NAME_MOST") == MAX_NAME_BYTES
