"""Messages as another producer (or a hand in redis-cli) could plant them: one with
chosen fields, and a hypothesis strategy for envelopes of any shape."""
from __future__ import annotations

import datetime as dt
import math
from typing import Any, Dict

import msgpack  # type: ignore[import-untyped]
from hypothesis import strategies as st

from minitask.wire.message import MAX_ATTEMPT, MAX_MS

NOW_MS = 1_800_000_000_000  # the ManualClock's start
UTC = dt.timezone.utc


def body(**changes: Any) -> bytes:
    """A planted message of task "shop.pair", with fields replaced."""
    fields: Dict[str, Any] = {
        "v": 1, "id": "planted-1", "task": "shop.pair", "args": ["x", "y"], "kwargs": {},
        "queue": "default", "priority": 5, "enqueued_at_ms": NOW_MS, "eta_ms": None,
        "attempt": 1}
    fields.update(changes)
    return msgpack.packb(fields, use_bin_type=True)  # type: ignore[no-any-return]


_INTS = st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1)
_KEYS = st.one_of(st.text(max_size=8), st.binary(max_size=8), _INTS, st.booleans(),
                  st.none(), st.floats(allow_nan=False))
_SCALARS = st.one_of(
    st.none(), st.booleans(), _INTS, st.floats(), st.text(max_size=20), st.binary(max_size=20),
    st.sampled_from([0, 1, 9, 10, -1, MAX_MS, MAX_MS + 1, MAX_ATTEMPT, MAX_ATTEMPT + 1,
                     NOW_MS, NOW_MS * 1000, 2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1,
                     math.inf, -math.inf, math.nan, "", "\x00", "a\nb", "\x1b[31m", "\u2028",
                     "\u200b", "\ufeff"]),
    st.datetimes(timezones=st.just(UTC)),
    st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4)))
#: Any value msgpack can carry, nested a few levels.
JUNK = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=20)
_MISSING = object()
_FIELDS = {
    "v": st.just(1),
    "id": st.text(min_size=1, max_size=12),
    "task": st.text(min_size=1, max_size=12),
    "args": st.lists(JUNK, max_size=3),
    "kwargs": st.dictionaries(st.text(max_size=5), JUNK, max_size=3),
    "queue": st.text(min_size=1, max_size=12),
    "priority": st.integers(-2, 11),
    "enqueued_at_ms": st.integers(-2, MAX_MS + 2),
    "eta_ms": st.one_of(st.none(), st.integers(-2, MAX_MS + 2)),
    "attempt": st.integers(-1, MAX_ATTEMPT + 1),
}


@st.composite
def envelopes(draw: Any) -> Any:
    """Envelopes whose fields are each valid-looking, junk, or missing; some extra keys."""
    obj: Dict[Any, Any] = {}
    for name, good in _FIELDS.items():
        value = draw(st.one_of(good, good, JUNK, st.just(_MISSING)))
        if value is not _MISSING:
            obj[name] = value
    obj.update(draw(st.dictionaries(_KEYS, JUNK, max_size=2)))
    return draw(st.one_of(st.just(obj), st.just(obj), JUNK))
