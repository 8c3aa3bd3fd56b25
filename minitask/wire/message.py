"""The data that travels through Redis: one enqueued call and one outcome.

Redis stores integer milliseconds; the public API speaks float seconds.
The helpers here are the only place that converts between the two. The
limits a message's fields keep to (times, attempts, printable names and
ids) are here too, for producers and decoders alike.
"""
from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import time
import unicodedata
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple, TypeVar

ENVELOPE_VERSION = 1

#: The latest time (Unix ms) a message may name: the end of year 9999, the last
#: instant a ``datetime`` holds. Times ten, as delayed and lease scores pack them,
#: it stays an integer that a Redis score (a double) holds exactly.
MAX_MS = 253_402_300_799_999

#: The longest duration an option may name (100 years of 365.25 days): far beyond
#: any real need, yet safe for ms arithmetic, Redis expiry times and thread waits.
MAX_SECONDS = 3_155_760_000
#: Bytes (UTF-8) a task or group id may hold at most: every key and log line repeats
#: one, and a workflow's plan record reads none longer (stores/plans.py).
MAX_ID_BYTES = 200
#: Bytes (UTF-8) a task name may hold at most: ``@app.task`` refuses a longer one, and a
#: worker dead-letters a message naming one (every log line and record repeats it).
MAX_NAME_BYTES = 1000

#: Retries a task may ask for. A message's ``attempt`` runs from 1 to
#: ``MAX_RETRIES + 1``; the backoff ``2 ** (attempt - 1)`` then stays a float.
MAX_RETRIES = 1000
MAX_ATTEMPT = MAX_RETRIES + 1

#: Unicode categories that no name or task id may hold: controls (Cc, terminal
#: escapes included), format characters (Cf: zero-width and bidi overrides), line
#: and paragraph separators (Zl, Zp), which forge or garble log lines, and lone
#: surrogates (Cs), which UTF-8 cannot carry.
UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})

#: The states ``TaskHandle.status()`` can report.
STATUSES = ("scheduled", "queued", "running", "retrying", "succeeded", "failed",
            "cancelled", "unknown")


def to_ms(seconds: float) -> int:
    """Seconds (float) to whole milliseconds, rounding up so nothing fires early."""
    ms = seconds * 1000.0
    whole = int(ms)
    return whole + 1 if ms > whole else whole


#: A lone surrogate (half of a UTF-16 pair), which UTF-8 cannot carry.
_SURROGATE = re.compile("[\ud800-\udfff]")


def texts_repaired(data: Any) -> Any:
    """``data`` with each lone surrogate of its texts (a str, or one in a list, tuple or
    dict) as U+FFFD, the rest as it is: the one rule for text of the app's code that a
    record minitask writes holds (an exception's message, type name and traceback, a
    note). Such text is ordinary (``os.fsdecode`` of a file name); UTF-8 cannot carry
    it, and it must never cost the outcome it is part of."""
    if isinstance(data, str):
        return data if data.isascii() else _SURROGATE.sub("\ufffd", data)
    if isinstance(data, (list, tuple)):
        return [texts_repaired(item) for item in data]
    if isinstance(data, dict):
        return {texts_repaired(key): texts_repaired(value) for key, value in data.items()}
    return data


def unprintable(text: str) -> Optional[str]:
    """The first character of ``text`` in an ``UNPRINTABLE`` category, or None."""
    if text.isascii() and text.isprintable():
        return None
    for char in text:
        if unicodedata.category(char) in UNPRINTABLE:
            return char
    return None


def describe_char(char: str) -> str:
    """``'\\x1b' (U+001B, Cc)``: how an error names a refused character."""
    return f"{char!r} (U+{ord(char):04X}, {unicodedata.category(char)})"


def due_after_ms(clock: "Clock", seconds: float) -> int:
    """The first whole ms at or after ``seconds`` from now: never before the instant asked for.

    The system clock is read in ns: its ms reading is rounded down, so adding the delay
    to it could fall up to 1 ms before the instant (a task started 0.4 ms early).
    """
    if isinstance(clock, SystemClock):
        return -(-(clock.now_ns() + math.ceil(seconds * 1e9)) // 1_000_000)
    return clock.now_ms() + to_ms(seconds)


def to_seconds(ms: int) -> float:
    return ms / 1000.0


def wall_ms() -> int:
    """Wall-clock time in integer milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


class Clock(Protocol):
    """Time in integer milliseconds; tests swap in a clock they move by hand."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real clock, read as Redis's once a worker measured how far apart they are;
    tests swap in a clock whose time they move by hand."""

    #: How far this machine's clock is ahead of Redis's (ms), as a worker of this
    #: process last measured it (worker/redis_time.py), taken from every reading: the
    #: deadlines workers compare with each other's are all on Redis's clock. 0 until
    #: measured (a producer's own clock).
    offset_ms = 0
    #: Redis's time and ``_ticks_ns`` (ns) at that measure: from then on a reading is
    #: Redis's time then plus how far ``_ticks_ns`` has run since, so that
    #: a step of the machine's clock (NTP, a VM resumed) changes no reading before the
    #: next measure (a worker whose clock stepped an hour ahead took the others' leases
    #: as expired in the seconds until it measured again).
    _anchor: Optional[Tuple[int, int]] = None
    #: When (``time.monotonic()``) Redis's time was last measured here; None: never.
    measured_at: Optional[float] = None

    def go_by_redis(self, offset_ms: int) -> None:
        """Read Redis's time from now on; this machine's clock is ``offset_ms`` ahead."""
        self.offset_ms = offset_ms
        self._anchor = (time.time_ns() - offset_ms * 1_000_000, _ticks_ns())
        self.measured_at = time.monotonic()

    def now_ms(self) -> int:  # (at every fetch and ack: no call to now_ns)
        anchor = self._anchor
        if anchor is None:
            return time.time_ns() // 1_000_000 - self.offset_ms
        return (anchor[0] + _ticks_ns() - anchor[1]) // 1_000_000

    def now_ns(self) -> int:
        anchor = self._anchor
        if anchor is None:  # a producer's process: its own clock
            return time.time_ns() - self.offset_ms * 1_000_000
        return anchor[0] + _ticks_ns() - anchor[1]


#: A clock that no step of the machine's moves, and that runs on while it is suspended
#: (Linux's CLOCK_BOOTTIME; the monotonic clock elsewhere, which stops meanwhile).
_ticks_ns: Callable[[], int] = (functools.partial(time.clock_gettime_ns, time.CLOCK_BOOTTIME)
                                if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic_ns)


_Record = TypeVar("_Record", bound=type)


class _Factory:
    """A default made by a field's factory, as a signature shows it."""

    def __repr__(self) -> str:
        return "<factory>"


def quick_init(cls: _Record) -> _Record:
    """Give a frozen dataclass an ``__init__`` that fills the new object's ``__dict__``
    directly, for the records a worker builds for every task.

    The generated one sets each field through ``object.__setattr__`` (a global
    lookup and a call a field); this one stores them in its dict. The
    object is the same: frozen, equal, hashable, its defaults and default
    factories applied, the same errors for an argument missing or unknown. A
    dataclass with ``__post_init__``, keyword-only or ``init=False`` fields is
    refused rather than built wrong (tests/unit/test_quick_init.py).
    """
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen or hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"quick_init: {cls.__name__} must be a frozen dataclass without "
                        f"__post_init__ or __slots__")
    names, signature, body = [], [], []
    scope: Dict[str, Any] = {"__dataclass_factory__": _Factory()}
    for item in fields(cls):
        if not item.init or item.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{item.name} is keyword-only or "
                            f"not set by __init__")
        names.append(item.name)
        if item.default is not MISSING:
            scope[f"__dataclass_dflt_{item.name}__"] = item.default
            signature.append(f"{item.name}=__dataclass_dflt_{item.name}__")
        elif item.default_factory is not MISSING:
            scope[f"__dataclass_factory_{item.name}__"] = item.default_factory
            signature.append(f"{item.name}=__dataclass_factory__")
            body.append(f"    if {item.name} is __dataclass_factory__:\n"
                        f"        {item.name} = __dataclass_factory_{item.name}__()")
        else:
            signature.append(item.name)
    # the names dataclasses uses for its own: no field can take them
    body.append("    __dataclass_state__ = __dataclass_self__.__dict__")
    body += (f"    __dataclass_state__[{name!r}] = {name}" for name in names)
    exec(f"def __init__(__dataclass_self__, {', '.join(signature)}):\n" + "\n".join(body),
         scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    generated = cls.__dict__["__init__"]
    init.__doc__ = generated.__doc__
    init.__annotations__ = dict(generated.__annotations__)
    cls.__init__ = init  # type: ignore[misc]
    return cls


@quick_init
@dataclass(frozen=True)
class Message:
    """One enqueued call of a task, as it is stored in Redis."""

    id: str
    task: str
    args: List[Any]
    kwargs: Dict[str, Any]
    queue: str
    priority: int
    enqueued_at_ms: int
    eta_ms: Optional[int] = None
    attempt: int = 1
    #: What follows this call in a workflow (chain, group, chord), packed by
    #: ``stores.workflows``; None for a plain task. Opaque to everything else.
    workflow: Optional[bytes] = None
    #: The producer's trace context (W3C ``traceparent``, ``tracestate``), with
    #: ``minitask[otel]`` and a span active at enqueue; None otherwise.
    trace: Optional[Dict[str, str]] = None
    #: Flow control of this call (limits, expiry, debounce), packed by ``limits``;
    #: kept beside the message in Redis by the enqueue script, not in its envelope.
    flow: Optional[str] = field(default=None, compare=False)


#: Message's defaults, for ``new_message``.
_MESSAGE_DEFAULTS = {f.name: f.default for f in fields(Message) if f.default is not MISSING}


def new_message(id: str, task: str, args: List[Any], kwargs: Dict[str, Any], queue: str,
                priority: int, enqueued_at_ms: int, eta_ms: Optional[int],
                flow: Optional[str] = None,
                trace: Optional[Dict[str, str]] = None) -> Message:
    """``Message(...)`` with these fields at a fifth of the cost, for the producer's hot
    path: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__`` (3 us of a ``delay()``). The same object: equal,
    still frozen, the other fields at their defaults; Message has no ``__post_init__``
    to skip (tests/unit/test_producer_fast.py holds both to that).
    """
    message = object.__new__(Message)
    state = message.__dict__
    state.update(_MESSAGE_DEFAULTS)
    state.update(id=id, task=task, args=args, kwargs=kwargs, queue=queue, priority=priority,
                 enqueued_at_ms=enqueued_at_ms, eta_ms=eta_ms, flow=flow, trace=trace)
    return message


@quick_init
@dataclass(frozen=True)
class Outcome:
    """How an attempt or a whole task ended: a result, a retry note or a dead letter."""

    status: str
    finished_at_ms: int
    value: Any = None
    exc_type: str = ""
    message: str = ""
    traceback: str = ""
    reason: str = ""
    attempt: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """The last progress a running task reported with ``set_progress``.

    Attributes:
        current: how far the task is.
        total: out of how much, if it said.
        message: what it is doing, if it said.
        at: when it reported this, an aware UTC datetime.
    """

    current: float
    total: Optional[float]
    message: Optional[str]
    at: _dt.datetime


def undecodable(exc: BaseException) -> str:
    """What msgpack's refusal of corrupt bytes says: its type and message, and for a
    refusal with none (msgpack's StackError for data nested deeper than it reads), what
    it means."""
    detail = str(exc) or ("nested too deeply to read (no minitask writes data that deep)"
                          if type(exc).__name__ == "StackError" else "")
    return f"{type(exc).__name__}: {detail}"
