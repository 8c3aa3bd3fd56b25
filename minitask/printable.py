"""``printable``: the one way a string read from Redis reaches a terminal, a log
line or a page.

Queue, worker and subscriber names, task ids, exception and progress messages
are all data someone may have planted in Redis. Printed raw, an escape
character can rewrite the terminal and a newline can forge a log line. Every
such string goes through ``printable`` first: what is printable stays as it
is, and nothing else can reach the reader unescaped.
"""
from __future__ import annotations

from typing import Any

#: Characters that are printable but move or reorder text: line and paragraph
#: separators, and the bidirectional controls that can make a name read backwards.
_MOVING = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                    "\u2066\u2067\u2068\u2069\u061c")


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: Any, *, keep_newlines: bool = False) -> str:
    """``value`` as text safe to print: bytes are read as UTF-8 (a byte that is not
    shows as ``\\xNN``), and every control character (C0, DEL, C1, separators,
    bidirectional controls, surrogates) as its ``\\x`` / ``\\u`` escape.

    Args:
        value: a str, bytes, or anything ``str()`` can show.
        keep_newlines: leave ``\\n`` as it is (a traceback shown on lines of
            its own); every other control character is still escaped.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        shown = bytes(value).decode("utf-8", "backslashreplace")
    else:
        shown = value if isinstance(value, str) else str(value)
    if shown.isprintable() and not _MOVING.intersection(shown):
        return shown
    return "".join(
        char if (char.isprintable() and char not in _MOVING)
        or (keep_newlines and char == "\n") else _escaped(char)
        for char in shown)


def readable(value: Any) -> bool:
    """Whether ``value`` (str or bytes) is text ``printable`` leaves as it is: UTF-8,
    with no control character. A name read from Redis that is not is someone else's."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return isinstance(value, str) and printable(value) == value


__all__ = ["printable", "readable"]
