"""Script calls packed as RESP bytes ahead of time, for the hot paths.

redis-py packs every argument of every call in Python; on the enqueue, fetch
and ack paths that costs more than the round trip itself. A script's constant
parts (EVALSHA, its sha, its static keys) are packed once here, and each call
adds only its own tail.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence, Tuple

#: One script call: (script name, slot, static keys, tail, dynamic key count). The
#: tail is the dynamic keys, then ARGV; the slot (a queue's name, say) tells apart
#: calls whose static keys differ, so each is packed once.
ScriptCall = Tuple[str, str, Sequence[str], Sequence[Any], int]


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
        parts = [b"*%d\r\n" % (3 + self.static + len(tail)), self.head,
                 bulk(self.static + dynamic_keys), self.keys]
        for part in tail:
            kind = type(part)  # exact types first: isinstance() and str() cost more
            if kind is str:
                part = part.encode()
            elif kind is int:
                part = b"%d" % part
            elif kind is not bytes:
                part = part if isinstance(part, bytes) else str(part).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(part), part))
        return b"".join(parts)
