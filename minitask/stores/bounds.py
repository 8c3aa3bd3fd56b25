"""How long a value minitask writes can be, and the reads that measure a value first.

minitask bounds what it writes: a message by the app's ``max_message_bytes``, a
kept result by ``max_result_bytes``, an error's text and traceback by
``ERROR_TEXT_MOST`` and ``ERROR_TRACE_MOST`` characters. A value longer than that
is no value minitask wrote: a reader measures it first (HSTRLEN, MEMORY USAGE for a
result list) and never reads it, says "too large (N bytes, not read)" where the
value would be shown, and one log line naming the key. Twenty planted messages of
10 MB made each listing of scheduled tasks read 200 MB, and blocked Redis for every
other client for 1.5 s a call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import Transport
from ..errors import DecodeError
from ..printable import ERROR_TEXT_MOST, ERROR_TRACE_MOST, printable
from .foreign import ignored, removed_members

#: Bytes a value may hold beyond the limit its writer checks: the fields around it
#: (a retried message's attempt, an outcome's times and names).
SLACK = 65_536
#: The longest error outcome (a retry's note, a dead letter's record, a failed
#: task's result): its text and traceback, of up to 4 UTF-8 bytes a character.
ERROR_OUTCOME_BYTES = 4 * (ERROR_TEXT_MOST + ERROR_TRACE_MOST) + SLACK
#: ``max_message_bytes``'s default (app.py); ``max_result_bytes`` defaults to it.
DEFAULT_MESSAGE_BYTES = 1_048_576
#: The most bytes of a message one reply carries when a poisoned task's burial reads it
#: (``message_in_pieces``): well below the 1 MB a ``client-output-buffer-limit`` is
#: often set to, over which Redis closes the connection instead of replying.
PIECE_BYTES = 262_144
#: The most pieces a message is read in: Redis copies the whole message at each
#: (message_piece.lua), so a longer one (over 8 MiB) is measured and not read.
PIECES_MOST = 32


@dataclass(frozen=True)
class Bounds:
    """The longest value of each kind a reader reads (``Bounds.of`` an app's limits)."""

    #: a task's message (the messages hash)
    message: int = DEFAULT_MESSAGE_BYTES + SLACK
    #: an encoded outcome: a kept result, a retry's note, a dead letter's record
    outcome: int = max(DEFAULT_MESSAGE_BYTES + SLACK, ERROR_OUTCOME_BYTES)

    @classmethod
    def of(cls, max_message_bytes: int, max_result_bytes: int) -> "Bounds":
        return cls(max_message_bytes + SLACK, max(max_result_bytes + SLACK, ERROR_OUTCOME_BYTES))


class TooLarge:
    """A value measured and not read: longer than any minitask writes there."""

    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        self.length = length

    def __repr__(self) -> str:
        return f"TooLarge({self.length})"


def too_large(key: str, field: Any, length: int, most: Optional[int] = None, *,
              length_last: bool = False, memory: bool = False) -> str:
    """Why a value of ``key`` (a hash's ``field``, or None) is not read, said once in
    the log; the text a listing or a record shows in its place (``length_last``: its
    length at the end, as a dead letter's unreadable record says it). ``memory``:
    ``length`` is the key's memory use (MEMORY USAGE, a list's), not the value's length."""
    where = f"key {printable(key)}" + ("" if field is None else
                                       f" field {printable(field)[:200]!r}")
    bound = "any" if most is None else f"the {most:,} bytes"
    size = f"{length:,} bytes of memory" if memory else f"{length:,} bytes"
    ignored(key, f"a value {'using' if memory else 'of'} {size}, longer than {bound} "
                 f"minitask writes there, is not read")
    if length_last:
        return f"{where} is too large, not read ({size})"
    return f"{where} is too large ({size}, not read)"


#: One field to read: (hash key, field, the most bytes read).
Ask = Tuple[str, Any, int]
#: A field read: its value, None (no such field), a ``TooLarge`` (measured, not read)
#: or an Exception (the key holds another type: Redis's refusal).
Field = Any


def fields_call(asks: Sequence[Ask]) -> ScriptCall:
    """The hash_fields.lua call that reads ``asks`` (the async twin sends the same)."""
    keys = [key for key, _, _ in asks]
    args: List[Any] = []
    for _, field, most in asks:
        args += (field, most)
    return ("hash_fields", "", (), [*keys, *args], len(keys))


def fields_of(asks: Sequence[Ask], replies: Sequence[Any]) -> List[Field]:
    """hash_fields.lua's replies to ``asks``, read (``Field``)."""
    found: List[Field] = []
    for (key, _, _), reply in zip(asks, replies):
        if isinstance(reply, list):  # {length}: longer, or {-1}: another type
            length = int(reply[0])
            found.append(TooLarge(length) if length >= 0 else TypeError(
                f"WRONGTYPE key {key} holds another type than a hash"))
        else:
            found.append(reply)
    return found


def read_fields(transport: Transport, asks: Sequence[Ask], what: str) -> List[Field]:
    """Each asked field, in one round trip (hash_fields.lua): read only when it is no
    longer than its bound. The store calling it registers ``hash_fields``."""
    if not asks:
        return []
    name, _, _, tail, dynamic = fields_call(asks)
    return fields_of(asks, transport.run(name, tail[:dynamic], tail[dynamic:], what))


def value_or_note(key: str, field: Any, found: Field, most: int, *,
                  length_last: bool = False) -> Tuple[Optional[bytes], str]:
    """A field ``read_fields`` read, as (its value or None, why it is not read: '')."""
    if isinstance(found, TooLarge):
        return None, too_large(key, field, found.length, most, length_last=length_last)
    return (found if isinstance(found, bytes) else None), ""


def message_of(transport: Transport, key: str, task_id: str, most: int) -> Optional[bytes]:
    """A task's message in ``key`` (its queue's messages), read (``message_from``)."""
    ask = (key, task_id, most)
    return message_from(ask, read_fields(transport, [ask], f"read message {task_id}")[0])


def message_from(ask: Ask, found: Field) -> Optional[bytes]:
    """A task's message as ``read_fields`` read it (``ask``: its key, id and bound), or
    None: there is none, or the key holds another type (no minitask wrote it: said once).

    Raises:
        DecodeError: the message is longer than its bound (no minitask wrote it): it is
            measured, said once, and not read.
    """
    key, task_id, most = ask
    if isinstance(found, TooLarge):
        raise DecodeError(f"the message of task {printable(task_id)!r}: "
                          f"{too_large(key, task_id, found.length, most)}")
    if isinstance(found, Exception):
        ignored(key, "it holds another type than a hash")
        return None
    return found if isinstance(found, bytes) else None


def message_in_pieces(transport: Transport, key: str, task_id: str,
                      most: int) -> Tuple[Optional[bytes], int]:
    """A task's message in ``key`` and its length (0: none), read in pieces of at most
    ``PIECE_BYTES`` (a short one in one round trip); one over ``PIECE_BYTES`` times
    ``PIECES_MOST`` is measured and not read: (None, its length). The store calling
    it registers ``hash_fields`` and ``message_piece``.

    Raises:
        DecodeError: the message is longer than ``most`` (``message_from``), or it
            changed while it was read.
    """
    what = f"read message {task_id}"
    found = read_fields(transport, [(key, task_id, min(most, PIECE_BYTES))], what)[0]
    if not isinstance(found, TooLarge):
        body = message_from((key, task_id, most), found)
        return body, len(body or b"")
    length = found.length
    if length > most:
        message_from((key, task_id, most), found)  # raises: no minitask wrote it
    if length > PIECE_BYTES * PIECES_MOST:
        return None, length
    parts: List[bytes] = []
    at = 0
    while at < length:
        reply = transport.run("message_piece", (key,), (task_id, at, PIECE_BYTES), what)
        if int(reply[0]) <= 0:
            return None, 0  # gone meanwhile (another fetch buried it), or another type
        if int(reply[0]) != length or not reply[1]:
            raise DecodeError(f"the message of task {printable(task_id)!r} changed while "
                              f"it was read")
        parts.append(reply[1])
        at += len(reply[1])
    return b"".join(parts), length


def bounded_page(transport: Transport, key: str, start: int, stop: int, scores: bool,
                 most: int, what: str, strict: bool = False) -> List[Any]:
    """ZRANGE ``key`` ``start`` ``stop`` (``scores``: as (member, score) pairs), none of
    its members longer than ``most`` bytes: members_page.lua removes a longer one unsent,
    said once naming the key and its length. A key of another type reads as empty, or
    (``strict``) raises BrokerError. The store calling it registers ``members_page``."""
    flat, removed = transport.run("members_page", (key,),
                                  (start, stop, "WITHSCORES" if scores else "", most,
                                   "strict" if strict else ""), what)
    removed_members(key, removed)
    if not scores:
        return list(flat)
    return [(member, float(score)) for member, score in zip(flat[0::2], flat[1::2])]
