"""RecentStore: each queue's record of its last outcomes, and reading it back.

The scripts that end an attempt (ack, retry, bury, end_cancelled, cancel) add
one entry each to the queue's ``recent`` stream, trimmed to about the app's
``recent_outcomes`` entries in the same command (lib.lua's ``remember``: ``MAXLEN
~``, whole stream nodes, a third of an exact trim's cost), so Redis holds at most
one stream node more (``stream-node-max-entries``, 100 by default) and nothing
prunes it later. A read shows the newest ``recent_outcomes`` of the reading app
only (recent_page.lua): a listing is the last outcomes exactly. Each entry carries
its writer's cap (field ``n``), read only by an app that keeps no record (any
program may write it: a planted n of 1 hid all but one outcome). An app with
``recent_outcomes=0`` passes no entry, and no script writes one.

An entry is small and packed (``pack_data``): what ran, how it ended, when,
where and for how long, and the start of the error; never the arguments.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import DecodeError
from ..printable import cut_text, shown_name
from ..wire.message import MAX_ATTEMPT, MAX_MS, MAX_NAME_BYTES, to_seconds
from ..wire.serializer import pack_data, unpack_data
from .foreign import ignored
from .store import Store

#: Entries shown per queue unless the app says otherwise (``recent_outcomes``).
DEFAULT_LENGTH = 2000
#: The most an app may keep per queue: the record is read whole to be searched.
MAX_LENGTH = 100_000
#: Characters of an error message an entry keeps.
ERROR_CHARS = 200
#: The states an entry records.
STATES = ("succeeded", "retried", "dead", "cancelled")
_VERSION = 1


@dataclass(frozen=True)
class RecentOutcome:
    """One entry of a queue's record of recent outcomes.

    Attributes:
        task_id: the task's id.
        name: the task's name.
        queue: the queue it ran from.
        state: ``succeeded``, ``retried`` (failed, another attempt is scheduled),
            ``dead`` or ``cancelled``.
        at: when the outcome was recorded, an aware UTC datetime.
        attempt: the attempt that ended (0 when none ran: cancelled before it started).
        duration: seconds the attempt ran, None when none ran.
        worker: the worker that recorded it ('' for a producer's cancel).
        error: ``ExcType: message``, cut to ERROR_CHARS ('' for a success).
    """

    task_id: str
    name: str
    queue: str
    state: str
    at: _dt.datetime
    attempt: int
    duration: Optional[float]
    worker: str
    error: str

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready: the time as ISO 8601."""
        found = dict(vars(self))
        found["at"] = self.at.isoformat()
        return found


def pack_entry(task_id: str, name: str, state: str, at_ms: int, attempt: int,
               duration: Optional[float], worker: str, error: str = "") -> bytes:
    """An entry of the record, packed as the scripts store it."""
    took = None if duration is None else max(0, round(duration * 1000))
    return pack_data([_VERSION, task_id, name, state, at_ms, attempt, took, worker,
                      error[:ERROR_CHARS]], "a recent outcome")


def unpack_entry(queue: str, data: bytes) -> Optional[RecentOutcome]:
    """An entry as ``pack_entry`` packed it; None for one minitask did not write. Its
    text is cut as the listings show it, never shorter than a writer keeps it: an id,
    a worker's name or a state longer than a name (``shown_name``, 300 characters: a
    worker writes an id over ``MAX_ID_BYTES`` as ``shown_id`` cuts it, some 250, which
    stays whole), a task name over ``MAX_NAME_BYTES`` characters, an error over
    ``ERROR_CHARS`` (a planted entry of 2.7 MB made a listing of that size)."""
    try:
        fields: Any = unpack_data(data, "a recent outcome")
    except DecodeError:
        return None
    if not isinstance(fields, list) or len(fields) != 9 or fields[0] != _VERSION:
        return None
    _, task_id, name, state, at_ms, attempt, took, worker, error = fields
    if not (all(isinstance(v, str) for v in (task_id, name, state, worker, error))
            and type(at_ms) is int and 0 <= at_ms <= MAX_MS and type(attempt) is int
            and 0 <= attempt <= MAX_ATTEMPT
            and (took is None or type(took) is int and 0 <= took <= MAX_MS)):
        return None
    return RecentOutcome(shown_name(task_id), cut_text(name, MAX_NAME_BYTES), queue,
                         shown_name(state),
                         _dt.datetime.fromtimestamp(to_seconds(at_ms), tz=_dt.timezone.utc),
                         attempt, None if took is None else took / 1000, shown_name(worker),
                         cut_text(error, ERROR_CHARS))


#: The last ID a stream can hold: a record whose newest entry has it (planted: its
#: IDs are the server's time) can be added to no more (lib.lua's remember).
LAST_ID = f"{2 ** 64 - 1}-{2 ** 64 - 1}".encode()
#: What a reader says of a record minitask cannot add to.
UNWRITABLE = "this queue's record of recent outcomes cannot be written"


#: The most bytes of a packed entry a read takes (recent_page.lua): a writer's is at
#: most a few kB (names of 300 characters, an error of ERROR_CHARS); a longer one is
#: no minitask's, and only its length is sent.
ENTRY_BYTES = 16_384


class RecentStore(Store):
    """Reading the record of recent outcomes of an app's queues."""

    scripts = ("recent_page",)

    def read(self, queues: List[str], count: int, own: int = 0
             ) -> Tuple[Dict[str, List[RecentOutcome]], int]:
        """The newest ``count`` entries of each queue's record, newest first, and no
        more than its writers' ``recent_outcomes`` (the newest entry's, recent_page.lua;
        never below ``own``, the reading app's: a planted entry's cap of 1 hid the rest),
        in one round trip for them all (one script call each: an entry longer than ``ENTRY_BYTES``
        is not sent, and is removed there, so that the next listing does not read it
        again), and how many entries were left out. A record of another type (no
        minitask wrote it) is read as empty, said once; an entry that is not
        minitask's is left out, said in the log and counted: a listing with every
        entry left out says so, not that nothing ended."""
        keys = [self.keys(queue).recent for queue in queues]
        calls = [("recent_page", "", (), (key, count, ENTRY_BYTES, own, MAX_LENGTH), 1)
                 for key in keys]
        replies = self.transport.run_calls(
            calls, f"read the recent outcomes of {len(queues)} queue(s)") if calls else []
        found: Dict[str, List[RecentOutcome]] = {}
        left_out = 0
        for queue, key, (ok, reply) in zip(queues, keys, replies):
            if not ok:
                ignored(key, f"{UNWRITABLE}: it holds another type than a stream "
                             f"({_text(reply)})")
                reply = []
            elif reply and reply[0][0] == LAST_ID:  # no XADD can follow it
                ignored(key, f"{UNWRITABLE}: its last entry's ID is the last possible one "
                             f"({LAST_ID.decode()}), so it keeps the outcomes before it only")
            entries = []
            for _, body, *size in reply:
                entry = unpack_entry(queue, body) if isinstance(body, bytes) else None
                if size:  # its length, and 1 when recent_page.lua removed it (said once)
                    ignored(key, f"an entry is {int(size[0]):,} bytes long, more than "
                                 f"minitask writes ({ENTRY_BYTES:,}): "
                                 f"{'removed' if int(size[1]) else 'not read'}")
                elif entry is None:
                    ignored(key, "an entry is not one minitask wrote")
                else:
                    entries.append(entry)
                    continue
                left_out += 1
            found[queue] = entries
        return found, left_out


def _text(value: Any) -> str:
    return value.decode(errors="backslashreplace") if isinstance(value, bytes) else str(value)
