"""Script calls packed as RESP bytes ahead of time, for the hot paths.

redis-py packs every argument of every call in Python; on the enqueue, fetch
and ack paths that costs more than the round trip itself. A script's constant
parts (EVALSHA, its sha, its static keys) are packed once here, and each call
adds only its own tail.
"""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Sequence, Tuple

#: One script call: (script name, slot, static keys, tail, dynamic key count). The
#: tail is the dynamic keys, then ARGV; the slot (a queue's name, say) tells apart
#: calls whose static keys differ, so each is packed once.
ScriptCall = Tuple[str, str, Sequence[str], Sequence[Any], int]


#: Ints below this are packed once and kept (``int_bulk``): the small numbers script
#: calls pass again and again (a lease's length, a fetch's count, a ttl, a key count),
#: not timestamps, which the callers pass as digits already.
SMALL_INT = 10 ** 8
#: Most small ints kept: past these, one is packed anew at each use.
_KEPT_MOST = 4096
_INT_BULKS: Dict[int, bytes] = {}
#: ``*<n>\r\n`` array headers of the command lengths script calls have.
_ARRAY_HEADS = tuple(b"*%d\r\n" % n for n in range(128))
#: ``$<n>\r\n`` heads of the bulk strings of short arguments (ids, keys, numbers).
_BULK_HEADS = tuple(b"$%d\r\n" % n for n in range(256))


def int_bulk(value: int) -> bytes:
    """An int as one RESP bulk string, kept when small: formatting bytes costs a
    worker some 4,000 instructions an int, a dict look-up a few hundred."""
    packed = _INT_BULKS.get(value)
    if packed is None:
        digits = b"%d" % value
        packed = b"$%d\r\n%s\r\n" % (len(digits), digits)
        if 0 <= value < SMALL_INT and len(_INT_BULKS) < _KEPT_MOST:
            _INT_BULKS[value] = packed
    return packed


def bulk(value: Any) -> bytes:
    """One RESP bulk string."""
    if not isinstance(value, bytes):
        value = str(value).encode()
    return b"$%d\r\n%s\r\n" % (len(value), value)


def command(*parts: Any) -> bytes:
    """One command, packed ahead of time."""
    return b"*%d\r\n" % len(parts) + b"".join(bulk(part) for part in parts)


class PackedScript:
    """A script call whose constant parts (EVALSHA, sha, static keys) are packed once."""

    def __init__(self, name: str, source: str, static_keys: Sequence[str]) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self.static = len(static_keys)
        self.head = bulk("EVALSHA") + bulk(self.sha)
        self.keys = b"".join(bulk(key) for key in static_keys)

    def pack(self, tail: Sequence[Any], dynamic_keys: int = 0) -> bytes:
        """The whole command; ``tail`` is ``dynamic_keys`` more keys, then ARGV.

        ``bulk`` written out inline: a call per argument doubled the cost.
        """
        size = 3 + self.static + len(tail)
        parts = [_ARRAY_HEADS[size] if size < 128 else b"*%d\r\n" % size, self.head,
                 int_bulk(self.static + dynamic_keys), self.keys]
        kept = _INT_BULKS
        for part in tail:
            kind = type(part)  # exact types first: isinstance() and str() cost more
            if kind is str:
                part = part.encode()
            elif kind is int:
                parts.append(kept.get(part) or int_bulk(part))
                continue
            elif kind is not bytes:
                part = part if isinstance(part, bytes) else str(part).encode()
            size = len(part)
            parts += (_BULK_HEADS[size] if size < 256 else b"$%d\r\n" % size, part, b"\r\n")
        return b"".join(parts)
