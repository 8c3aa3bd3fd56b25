"""Reading what minitask did not write: the checks every read of minitask's keys
passes entries through on the Python side (lib.lua's guards() are the scripts').

An entry that fails its check is not minitask's: it is left where it is (it
may be someone's data) and ignored, said in a warning; a script that would
write over it refuses first. One bad entry never hides the good ones beside it,
nor another queue's. What is said is bounded whatever the data: a (key,
problem) pair is said once while it is among the last ``SAID_PAIRS`` said; a
read that meets many (``summarised``) says one line per key with a count and
an example; and a key gets at most ``KEY_LINES`` lines a ``KEY_WINDOW_S``, the
rest counted into its next line.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections import OrderedDict
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..broker.keys import check_name
from ..errors import DecodeError
from ..log_throttle import LogThrottle
from ..printable import cut_text, own_logger, printable, shown_id
from ..wire.message import MAX_MS
from .scripts import source

logger = own_logger(__name__)

#: 2000-01-01 UTC: no time minitask writes in a score (a due time, a lease deadline, a
#: time of death: each is "now" or later on the clock of the worker that wrote it) is
#: earlier; a 0 or a 1.0 planted there would read as a date in 1970.
EARLIEST_MS = 946_684_800_000

#: (key, problem) pairs said lately: each is said once while it is among these, not
#: once per read (the oldest is forgotten first, so the memory stays this size).
SAID_PAIRS = 512
#: Lines a key gets at most in ``KEY_WINDOW_S``; what comes beyond is counted and said
#: in its next line. Keys tracked at once: ``SAID_PAIRS`` too (least recent forgotten).
KEY_LINES = 5
KEY_WINDOW_S = 60.0
#: The most characters of a problem a line says (head and tail around its length): a
#: problem quoting a planted entry whole made a log line of that entry's size.
PROBLEM_SHOWN_MOST = 1_000

_LOCK = threading.Lock()
_SAID: "OrderedDict[Tuple[str, str], None]" = OrderedDict()
#: the lines each key said in its window, and the entries it held back since the last
_KEYS = LogThrottle(KEY_WINDOW_S, lines=KEY_LINES, keys=SAID_PAIRS)
#: the read being summarised (``summarised``): key -> [entries, first problem]
_READ: "contextvars.ContextVar[Optional[Dict[str, List[Any]]]]" = contextvars.ContextVar(
    "minitask_foreign_read", default=None)


def ignored(key: Any, problem: str) -> None:
    """Say that an entry of ``key`` is ignored because of ``problem``: once while the
    pair is remembered; inside ``summarised``, counted into one line per key. At most
    ``PROBLEM_SHOWN_MOST`` characters of ``problem`` are said, and kept."""
    shown = printable(key)
    problem = cut_text(problem, PROBLEM_SHOWN_MOST)
    read = _READ.get()
    if read is not None:
        if shown in read:
            read[shown][0] += 1
        elif len(read) < SAID_PAIRS:
            read[shown] = [1, problem]
        return
    _say(shown, problem, 1)


@contextlib.contextmanager
def summarised() -> Iterator[None]:
    """Within: what ``ignored`` is told is counted per key, then said as one line per
    key ("N entries of KEY ignored, e.g. ...") as the block ends: a read of 50,000
    foreign fields logs one line, not 50,000."""
    if _READ.get() is not None:  # nested: the outer read says it
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        read = _READ.get() or {}
        _READ.reset(token)
        for shown, (count, problem) in read.items():
            _say(shown, problem, count)


def _say(shown: str, problem: str, count: int) -> None:
    with _LOCK:
        if (shown, problem) in _SAID:
            _SAID.move_to_end((shown, problem))
            return
        _SAID[(shown, problem)] = None
        if len(_SAID) > SAID_PAIRS:
            _SAID.popitem(last=False)
        said = _KEYS.note(shown, count)
    if not said:
        return
    held = said - count
    more = f" ({held:,} more ignored in this key since its last line)" if held else ""
    if count == 1:
        logger.warning("ignored data minitask did not write in key %s: %s (inspect it with "
                       "redis-cli, then fix or delete it)%s", shown, printable(problem), more)
    else:
        logger.warning("ignored %s entries minitask did not write in key %s, e.g.: %s "
                       "(inspect them with redis-cli, then fix or delete them)%s",
                       f"{count:,}", shown, printable(problem), more)


def name_of(raw: Any, kind: str = "queue") -> Optional[str]:
    """A name read from a registry (a queue, a worker, a subscriber), or None when it
    cannot be one: not UTF-8, or a character names may not hold. A broadcast lane,
    ``queue:subscriber``, is a queue name of two names."""
    try:
        name = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        return None
    parts = name.split(":", 1) if kind == "queue" else [name]
    try:
        for part in parts:
            check_name(kind, part)
    except ValueError:
        return None
    return name


def shown_member(raw: Any, most: int = 80) -> str:
    """A registry member, escaped and quoted for a log line: its first ``most``
    characters and its length when it is longer (a planted 5 MB name)."""
    if len(raw) <= most:
        return repr(printable(raw))
    return f"{printable(raw[:most])!r}... ({len(raw)} long)"


def whole(value: Any, low: int = 0, high: int = MAX_MS) -> Optional[int]:
    """``value`` (a reply: bytes, str, float or int) as a whole number from ``low`` to
    ``high``, or None: text, non-finite, fractional, out of range."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str):
        if len(value) > 40:
            return None
        try:
            value = float(value) if any(c in value for c in ".eEnN") else int(value)
        except ValueError:
            return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != math.floor(value):
            return None
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        return None
    return value


def time_in(key: str, score: Any, what: str, scale: int = 1) -> Tuple[Optional[int], str]:
    """A time minitask stored in ``key`` (ms: a score, or a record's field), read: the
    one reader of every stored time, so that the pages, the operators' actions and
    ``testing.drain`` agree on what is one. ``score`` is the time times ``scale`` plus a
    digit below it (a delayed or lease score packs a priority digit); returns that
    time and ''; or None and what is wrong with it, naming ``what`` (a lease
    deadline...) and the key, said once in the log: inf, 1.5, text, before EARLIEST_MS
    or after the year 9999. No value (None, or a key of another type) is (None, '')."""
    if score is None or isinstance(score, Exception):
        return None, ""
    packed = whole(score, 0, MAX_MS * scale + scale - 1)
    if packed is not None and packed // scale >= EARLIEST_MS:
        return packed // scale, ""
    shown = score.decode("ascii", "backslashreplace") if isinstance(score, bytes) else (
        repr(score) if isinstance(score, float) else str(score))
    ignored(key, f"its {what} is no time minitask writes")
    return None, (f"its {what} in key {key} is no time minitask writes (score "
                  f"{printable(shown[:40])}): unreadable")


def text_of(value: Any) -> Optional[str]:
    """A reply as text, or None when it is not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return str(value)


#: The longest message a fetch reads unless told less (``FetchTerms.max_bytes``): Redis's
#: own limit for one string, the most an app's ``max_message_bytes`` may be.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
#: What a fetch leases in place of a message longer than the worker's
#: ``max_message_bytes`` (fetch.lua's body_of), which it does not read: this byte
#: (msgpack never starts with it), then the message's size in digits.
UNREAD_MARK = b"\xc1"


def unread_error(task_id: str, mark: bytes) -> DecodeError:
    """Why a message a fetch left unread (``UNREAD_MARK``) is dead-lettered, naming its
    size: minitask never writes one longer than ``max_message_bytes``."""
    size = whole(mark[1:40])
    return DecodeError(f"cannot decode message {shown_id(task_id)!r}: it is "
                       f"{'?' if size is None else f'{size:,}'} bytes, longer than this "
                       f"worker's max_message_bytes, and was not read (minitask never writes "
                       f"one that long: something else wrote it)")


def count_of(key: str, reply: Any) -> int:
    """A count of ``key``; 0 when it holds another type (no minitask wrote it, said once):
    one such key must not hide the counts of every other queue."""
    if isinstance(reply, Exception):
        ignored(key, f"it holds another type ({reply})")
        return 0
    return int(reply)


def foreign(exc: BaseException) -> bool:
    """Whether a BrokerError is Redis refusing data minitask did not write (a key of
    another type, a script stopped by a value it cannot read), not an outage: trying
    again cannot help, and nothing was changed."""
    return getattr(exc, "reason", None) in ("wrong type", "script")


def raise_refusals(replies: Iterable[Any]) -> None:
    """Raise the first reply of a pipeline read with ``raise_on_error=False`` that is a
    refusal other than WRONGTYPE (an ACL, a full Redis...): only a key of another type
    is data minitask did not write, to be left out; the rest is the caller's error."""
    for reply in replies:
        if isinstance(reply, Exception) and not str(reply).startswith("WRONGTYPE"):
            raise reply


def move_aside(client: Any, key: str, kind: str) -> None:
    """Move ``key``, of another type than the ``kind`` minitask keeps there, aside whole
    to ``key``:foreign (or :foreign2, up to :foreign100, which a 101st replaces), as
    lib.lua's aside() does, said once: the data stays for whoever wrote it, and the
    writes after it find the key missing. The look and the move are one script
    (move_aside.lua): two workers moving it at once (a process pool's supervisor and
    child each add metrics) never move what the first wrote again nor onto its copy. A
    key of that type by then (another hand moved it and wrote again), or gone, is left;
    any refusal is raised."""
    script = client.register_script(source("move_aside"))
    moved = script(keys=[key], args=[_TYPE_NAMES.get(kind, kind)])
    if moved:
        ignored(key, f"it held another type than the {kind} minitask keeps there; "
                     f"moved aside to {text_of(moved)}")


#: TYPE's names for the kinds the callers of ``move_aside`` name
_TYPE_NAMES = {"sorted set": "zset"}


def dropped_overlong(lines: Any) -> None:
    """Say the entries a script dropped as longer than any minitask writes in their key
    (fetch.lua's ``OVERLONG``: a 'key length' line each; a planted 50 MB id): one line
    each, naming the key and the length, never the content. They are gone: each is
    read, and said, once."""
    for line in (text_of(lines) or "").split("\n") if lines else ():
        key, _, length = line.rpartition(" ")
        size = whole(length)
        ignored(key, f"an entry of {'?' if size is None else f'{size:,}'} bytes, longer "
                     f"than any minitask writes there, was removed (read once, not kept)")


def removed_members(key: str, lengths: Any, what: str = "id") -> None:
    """Say the members of ``key`` a listing script removed, unsent, as longer than any
    ``what`` minitask writes there (lib.lua's bounded_members): one line each, naming
    the key and the length, never the content."""
    for length in lengths or ():
        size = whole(length)
        ignored(key, f"a member of {'?' if size is None else f'{size:,}'} bytes, longer than "
                     f"any {what} minitask writes there, was removed (not listed)")
