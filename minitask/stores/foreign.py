"""Reading what minitask did not write: the checks every read of minitask's keys
passes entries through on the Python side (lib.lua's guards() are the scripts').

An entry that fails its check is not minitask's: it is left where it is (it
may be someone's data) and ignored, with one warning per key and problem for
the life of the process; a script that would write over it refuses first. One
bad entry never hides the good ones beside it, nor another queue's.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Optional, Set, Tuple

from ..broker.keys import check_name
from ..printable import printable
from ..wire.message import MAX_MS

logger = logging.getLogger(__name__)

#: 2000-01-01 UTC: no time minitask writes in a score (a due time, a lease deadline, a
#: time of death: each is "now" or later on the clock of the worker that wrote it) is
#: earlier; a 0 or a 1.0 planted there would read as a date in 1970.
EARLIEST_MS = 946_684_800_000

#: (key, problem) pairs warned about already: one line each, not one per read.
_WARNED: Set[Tuple[str, str]] = set()


def ignored(key: Any, problem: str) -> None:
    """Say once that an entry of ``key`` is ignored because of ``problem``."""
    shown = printable(key)
    if (shown, problem) in _WARNED:
        return
    _WARNED.add((shown, problem))
    logger.warning("ignored data minitask did not write in key %s: %s (inspect it with "
                   "redis-cli, then fix or delete it)", shown, printable(problem))


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
