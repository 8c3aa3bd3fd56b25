"""Entries of a queue's ``cancels`` stream as a worker's watch reads them.

minitask writes two kinds: a request (one field, ``id``: a task id of at most
``MAX_ID_BYTES``) and a wake-up (``wake``: ``1``). Anything else was planted:
an XREAD cannot leave a field out, so a 100 MB one reaches every watch blocked
on the stream once; the first watch that reads it deletes it (XDEL) and says
so in one line naming the key, the entry's id and its size (never its content),
so that no watch, no later worker and no request reads it again.
"""
from __future__ import annotations

from typing import Any, Optional

import redis

from ..broker.transport import Transport
from ..printable import own_logger, printable, shown_id
from ..wire.message import MAX_ID_BYTES
from .foreign import ignored

logger = own_logger(__name__)


def request_of(fields: Any) -> Optional[str]:
    """The task id an entry's ``fields`` ask to stop, if they are a request as
    minitask writes it; else None."""
    if not isinstance(fields, dict) or len(fields) != 1:
        return None
    task_id = fields.get(b"id")
    if not isinstance(task_id, bytes) or not 0 < len(task_id) <= MAX_ID_BYTES:
        return None
    try:
        return task_id.decode()
    except UnicodeDecodeError:
        return None


def size_of(fields: Any) -> int:
    """Bytes of an entry's field names and values (what an XREAD of it carries)."""
    if not isinstance(fields, dict):
        return 0
    return sum(len(part) for pair in fields.items() for part in pair
               if isinstance(part, (bytes, str)))


def drop_foreign(transport: Transport, key: str, entry_id: Any, fields: Any) -> None:
    """Delete the entry ``entry_id`` of stream ``key``, which no minitask wrote, and say
    so once: the watch whose XDEL removed it says it; the others, which read the same
    entry at the same time, say nothing. Refused (an ACL without XDEL), said once per
    key: each watch then reads such an entry once, as it passes it."""
    shown = printable(entry_id)
    with transport.errors("delete an entry of the cancel requests no minitask wrote"):
        try:
            removed = transport.client.xdel(key, entry_id)
        except redis.ResponseError as exc:  # an outage still fails the watch's call
            ignored(key, f"it holds entries no minitask wrote, left in place: Redis "
                         f"refused XDEL ({exc}); allow xdel (see the ACL list in the "
                         f"scaling guide)")
            return
    if removed:
        count = len(fields) if isinstance(fields, dict) else 0
        ignored(key, f"entry {shown_id(shown)} is no cancel request minitask writes "
                     f"({count} field(s), {size_of(fields):,} bytes): deleted, unread by "
                     f"any later watch")
