"""How a write of commands failed, for the transport: whether Redis may have run
them. A cut write is counted (``write_counted``): the commands handed whole to
the socket before the cut may have run, those after it never did; a connection
that failed once the write was whole may have had them all run (``reply_lost``).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, List, Optional, Sequence

import redis

__all__ = ["WriteFailed", "call_ends", "closed_after", "reply_lost", "write_counted"]


class WriteFailed(redis.ConnectionError):
    """The connection failed while the commands were being written; ``whole`` of them
    had been handed to the socket whole before (they may have run)."""

    whole = 0


def call_ends(commands: Sequence[bytes], confirmation: bytes) -> Optional[List[int]]:
    """Where each of several calls ends in their write (None for one call alone,
    which a cut write never runs: the cheaper write of redis-py)."""
    if len(commands) < 2 and not confirmation:
        return None
    ends, offset = [], 0
    for one in commands:
        offset += len(one)
        ends.append(offset)
    return ends


def write_counted(connection: Any, data: bytes, ends: List[int]) -> None:
    """redis-py's write of ``data``, counting the bytes handed to the socket: a cut
    after the end of a command may have had it run (``WriteFailed.whole``), the
    write of an app.batch() block or of a script call and its WAIT."""
    if getattr(connection, "_sock", None) is None:
        connection.connect()  # (its failure: nothing written)
    elif hasattr(connection, "check_health"):
        connection.check_health()
    sock = connection._sock
    if not hasattr(sock, "send"):  # (a test double's socket: redis-py's write, uncounted)
        connection.send_packed_command([data], check_health=False)
        return
    view, done = memoryview(data), 0
    try:
        while done < len(data):
            done += sock.send(view[done:])
    except OSError as exc:  # (socket.timeout included)
        connection.disconnect()
        failed = WriteFailed(f"Error writing to {getattr(connection, 'host', 'Redis')}: "
                             f"{exc} ({done:,} of {len(data):,} bytes written)")
        failed.whole = bisect_right(ends, done)
        raise failed from exc


def reply_lost(exc: BaseException) -> bool:
    """Whether ``exc``, raised by ``_exchange`` or after it, means the connection failed
    once the commands were written whole: Redis may have run them (a failed write is
    ``WriteFailed``: the last command never ran)."""
    return (isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError))
            and not isinstance(exc, WriteFailed))


def closed_after(reply: redis.ResponseError) -> bool:
    """Whether Redis closes the connection after this error reply: a protocol error
    (a value longer than its ``proto-max-bulk-len``...) ends the connection, so the
    next command on it would meet a reset, not an outage."""
    return str(reply).startswith("Protocol error")
