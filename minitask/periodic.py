"""Periodic tasks: a schedule, its checks, and when its ticks fall.

A ``Schedule`` names a task, the arguments of its runs, and when they happen:
``every`` seconds (ticks at whole multiples of the period since the Unix
epoch, so that every worker computes the same ticks without asking anyone)
or a 5-field ``cron`` expression read in the IANA time zone ``tz``.

Cron fields are parsed by cronsim (the ``minitask[cron]`` extra), which
walks wall-clock times; turning a wall-clock time into an instant is done
here, with ``zoneinfo``, so that DST follows one rule: a local time that
does not exist (clocks jump forward over it) is skipped, and a local time
that happens twice (clocks go back) fires once, at its first occurrence.

Everything here is pure computation: storing schedules and firing ticks is
``stores/schedules.py`` and ``worker/ticks.py``.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import inspect
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .errors import (ArgumentError, ConfigurationError, DecodeError, MessageTooLarge,
                     MinitaskError)
from .printable import short_repr
from .wire.message import (MAX_ID_BYTES, MAX_MS, MAX_SECONDS, Message, describe_char,
                           unprintable)
from .wire.serializer import check_arguments, decode_message, encode_message
from .wire.types import TypeRegistry

#: What ``catch_up`` may say: after downtime, run the most recent missed tick once,
#: or none of the missed ticks.
CATCH_UP = ("latest", "skip")
#: A tick fired at most this late is on time; an older one was missed (the
#: workers were down or stalled), and ``catch_up`` decides what runs. Within the
#: grace a late worker fires each tick in turn: a short stall never loses a tick.
GRACE_MS = 1000
#: The names cron users know for common expressions.
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
             "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
             "@hourly": "0 * * * *"}
#: Version of the schedule record as stored in Redis.
RECORD_VERSION = 1

_UTC = _dt.timezone.utc
#: A schedule's name at most, in UTF-8: its runs' task ids, ``name@`` and a 24-character
#: time (``tick_id``), stay within the ``MAX_ID_BYTES`` every task id may have.
MAX_NAME_BYTES = MAX_ID_BYTES - len("@2026-01-01T00:00:00.000Z")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)
_MS = _dt.timedelta(milliseconds=1)


def _utc(ms: Optional[int]) -> Optional[_dt.datetime]:
    return None if ms is None else _EPOCH + ms * _MS


@dataclass(frozen=True)
class Schedule:
    """A periodic task: which task runs, with what, and when.

    Attributes:
        name: the schedule's name (a decorated task's schedule has the task's).
        task: the name of the task it runs.
        cron: the cron expression, or None.
        every: seconds between ticks, or None.
        tz: the IANA time zone ``cron`` is read in.
        args: positional arguments of each run.
        kwargs: keyword arguments of each run.
        catch_up: ``"latest"`` or ``"skip"``.
        overlap: whether a tick runs while the last run is pending.
        queue: the queue of the runs.
        priority: the priority of the runs.
        next_at: the next tick due, an aware UTC datetime (filled in when read
            back from Redis).
        last_at: the tick of the last run enqueued, or None before the first.
    """

    name: str
    task: str
    cron: Optional[str] = None
    every: Optional[float] = None
    tz: str = "UTC"
    args: Tuple[Any, ...] = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)
    catch_up: str = "latest"
    overlap: bool = True
    queue: str = "default"
    priority: int = 5
    next_at: Optional[_dt.datetime] = None
    last_at: Optional[_dt.datetime] = None

    @property
    def spec(self) -> str:
        """The schedule in one phrase: the cron expression or ``every 30s``."""
        return self.cron if self.cron is not None else f"every {self.every:g}s"

    # -- ticks ---------------------------------------------------------------

    def next_after(self, ms: int) -> Optional[int]:
        """The first tick strictly after ``ms`` (Unix ms); None if there is none
        before the end of year 9999 (or, for cron, within the next 50 years)."""
        if self.cron is None:
            period = _period_ms(self)
            following = (ms // period + 1) * period
            return following if following <= MAX_MS else None
        for instant in _cron_instants(self.cron, self.tz, ms, forward=True):
            if instant > ms:
                return instant
        return None

    def latest_at_or_before(self, ms: int) -> Optional[int]:
        """The last tick at or before ``ms``; None if there is none."""
        if self.cron is None:
            period = _period_ms(self)
            return (ms // period) * period
        found = None
        for instant in _cron_instants(self.cron, self.tz, ms, forward=False):
            if instant <= ms:
                found = instant
                break
        if found is None:
            return None
        # Walking wall-clock time backwards can land before ticks of a repeated hour
        # whose first occurrence is still at or before ``ms``: step forward over them.
        while True:
            following = self.next_after(found)
            if following is None or following > ms:
                return found
            found = following

    def tick_id(self, tick_ms: int) -> str:
        """The task id of the run of tick ``tick_ms``: the same in every worker."""
        stamp = (_EPOCH + tick_ms * _MS).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return f"{self.name}@{stamp}Z"

    def plan(self, armed_ms: int, now_ms: int) -> Tuple[Optional[int], Optional[int]]:
        """What firing the tick ``armed_ms`` at ``now_ms`` does: (the tick to run, or
        None; the tick to arm next, or None when the schedule has no more).

        A tick at most ``GRACE_MS`` late runs, and the next one is armed even if
        it is due already (a short stall loses nothing). An older tick was missed:
        with ``catch_up="latest"`` the most recent tick due runs once, with
        ``"skip"`` none does; either way the next tick armed is in the future.
        """
        if now_ms - armed_ms <= GRACE_MS:
            return armed_ms, self.next_after(armed_ms)
        latest = self.latest_at_or_before(now_ms)
        if latest is None or latest < armed_ms:
            latest = armed_ms
        return (latest if self.catch_up == "latest" else None), self.next_after(max(latest,
                                                                                    now_ms))

    def run_message(self, tick_ms: int, now_ms: int) -> Message:
        """The message of the run of tick ``tick_ms``: due at the tick, with its id."""
        return Message(id=self.tick_id(tick_ms), task=self.task, args=list(self.args),
                       kwargs=dict(self.kwargs), queue=self.queue, priority=self.priority,
                       enqueued_at_ms=now_ms, eta_ms=tick_ms)

    # -- the record stored in Redis ------------------------------------------

    def record(self) -> bytes:
        """The schedule as stored: its timing as JSON, a newline, then a message
        template carrying the task, queue, priority and arguments.

        Equal schedules give equal bytes, so rewriting an unchanged schedule is
        recognised (and keeps its next tick), and a worker firing from a stale
        copy is refused.
        """
        timing = {"v": RECORD_VERSION, "name": self.name, "cron": self.cron,
                  "every_ms": None if self.every is None else _period_ms(self), "tz": self.tz,
                  "catch_up": self.catch_up, "overlap": self.overlap}
        template = Message(id=self.name, task=self.task, args=list(self.args),
                           kwargs=dict(self.kwargs), queue=self.queue, priority=self.priority,
                           enqueued_at_ms=0)
        return (json.dumps(timing, sort_keys=True, separators=(",", ":")).encode() + b"\n"
                + encode_message(template))


class NewerRecord(DecodeError):
    """A schedule record a newer minitask wrote (its record version is past
    ``RECORD_VERSION``): this version cannot read it, and must not write over it (a
    worker of the older version, mid-deploy, would undo the newer definition)."""


def from_record(record: bytes, name: Optional[str] = None) -> Schedule:
    """The schedule a record holds; named ``name`` if given (the field it is stored
    under, which its errors then name), else as the record says.

    Raises:
        NewerRecord: a newer minitask wrote it.
        DecodeError: the record is corrupt or of an unknown version.
    """
    head, _, body = record.partition(b"\n")
    try:
        timing = json.loads(head)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise DecodeError(f"cannot decode a schedule record: {exc}") from exc
    version = timing.get("v") if isinstance(timing, dict) else None
    if type(version) is int and version > RECORD_VERSION:
        raise NewerRecord(f"cannot decode a schedule record: written by a newer minitask "
                          f"(record version {version}; this minitask reads version "
                          f"{RECORD_VERSION})")
    if not isinstance(timing, dict) or version != RECORD_VERSION:
        raise DecodeError(f"cannot decode a schedule record: unknown version in {head[:80]!r}")
    template = decode_message(body)
    every_ms = timing.get("every_ms")
    if every_ms is not None and type(every_ms) is not int:  # minitask writes whole ms
        raise DecodeError(f"cannot decode a schedule record: every_ms {_cut(every_ms)} is no "
                          f"whole number of milliseconds")
    try:
        return check_timing(Schedule(
            name=str(timing.get("name")) if name is None else name, task=template.task,
            cron=timing.get("cron"),
            every=None if every_ms is None else every_ms / 1000.0, tz=timing.get("tz", "UTC"),
            args=tuple(template.args), kwargs=template.kwargs,
            catch_up=timing.get("catch_up", "latest"), overlap=timing.get("overlap", True),
            queue=template.queue, priority=template.priority))
    except (ConfigurationError, TypeError) as exc:
        raise DecodeError(f"cannot decode a schedule record: {exc}") from exc


def with_times(schedule: Schedule, next_ms: Optional[int], last_ms: Optional[int]) -> Schedule:
    """The schedule with its next and last tick times, as read from Redis."""
    return dataclasses.replace(schedule, next_at=_utc(next_ms), last_at=_utc(last_ms))


# -- building and checking ---------------------------------------------------------

def build(name: Any, task: str, func: Callable[..., Any], *, cron: Any = None, every: Any = None,
          tz: Any = "UTC", args: Any = (), kwargs: Any = None, catch_up: Any = "latest",
          overlap: Any = True, queue: str, priority: int, max_message_bytes: int,
          types: Optional[TypeRegistry] = None, group_options: Sequence[str] = ()) -> Schedule:
    """A checked schedule: everything wrong with it is raised here, before any I/O.

    Its arguments keep the app's registered ``types`` as extensions (wire/types.py),
    as every message does.

    ``group_options``: the fair-queue options the task sets (``group_by``...): a
    run is sent without a group, so they are refused rather than not held.

    Raises:
        ConfigurationError: a bad name, cron, every, tz, catch_up or overlap, or a
            task with group options (a ValueError naming the schedule).
        ArgumentError: ``args``/``kwargs`` do not fit the task's function (a TypeError).
        EncodeError: an argument is not a msgpack type (a TypeError).
        MessageTooLarge: a run's message would be over ``max_message_bytes``.
    """
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"schedule of task {task!r}: name must be a non-empty str, "
                                 f"got {short_repr(name)}")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise ConfigurationError(
            f"schedule {name[:40]!r}...: name is {size:,} bytes (UTF-8), longer than "
            f"{MAX_NAME_BYTES}: its runs' task ids (name@time) are at most {MAX_ID_BYTES}")
    char = unprintable(name)
    if char is not None:
        raise ConfigurationError(f"schedule {name!r}: name holds {describe_char(char)}, a "
                                 f"control or format character")
    where = f"schedule {name!r}"
    if group_options:
        raise ConfigurationError(
            f"{where}: task {task!r} sets {', '.join(group_options)}, which a periodic run "
            f"would not hold (a tick is sent without a group: neither the group's turns "
            f"nor its limits would apply); schedule a task without group options that "
            f"sends the grouped call")
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise ArgumentError(f"{where}: args must be a tuple or list, got {short_repr(args)}",
                            task_name=task)
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
        raise ArgumentError(f"{where}: kwargs must be a dict with str keys, got "
                            f"{short_repr(kwargs)}", task_name=task)
    if isinstance(every, int) and not isinstance(every, bool) and abs(every) <= MAX_SECONDS:
        every = float(every)  # (a bigger int is refused below: float() of a huge one raises)
    if types:
        with schedule_named(name):
            args, kwargs = types.arguments_to_wire(task, args, kwargs)
    schedule = check_timing(Schedule(name=name, task=task, cron=cron, every=every, tz=tz,
                                     args=tuple(args), kwargs=dict(kwargs), catch_up=catch_up,
                                     overlap=overlap, queue=queue, priority=priority))
    try:
        inspect.signature(func).bind(*schedule.args, **schedule.kwargs)
    except TypeError as exc:
        raise ArgumentError(f"{where}: arguments do not fit task {task!r}: {exc}",
                            task_name=task) from None
    except ValueError:
        pass  # a callable without a signature: the worker's call is the check
    with schedule_named(name):
        check_arguments(task, schedule.args, schedule.kwargs)
    size = len(encode_message(schedule.run_message(MAX_MS, MAX_MS)))
    if size > max_message_bytes:
        raise MessageTooLarge(f"{where}: a run's message of {size} bytes is over "
                              f"max_message_bytes={max_message_bytes}; pass a reference "
                              f"instead of the data", task_name=task, size=size,
                              limit=max_message_bytes)
    return schedule


@contextmanager
def schedule_named(name: Any) -> Iterator[None]:
    """An error of minitask's raised inside names the schedule ``name`` (a str): its
    text is prefixed with it, unless it names it already; the same error, type and
    attributes, goes on (an argument ``delay()`` would refuse naming only the task)."""
    try:
        yield
    except MinitaskError as exc:
        if (isinstance(name, str) and exc.args and isinstance(exc.args[0], str)
                and f"schedule {name!r}" not in exc.args[0]):
            exc.args = (f"schedule {name!r}: {exc.args[0]}", *exc.args[1:])
        raise


def check_timing(schedule: Schedule) -> Schedule:
    """Check when a schedule fires; returns it, its cron nickname expanded.

    Raises:
        ConfigurationError: both or neither of cron and every, a bad cron, every not
            a number of seconds from 0.001 up, an unknown tz, catch_up or overlap.
    """
    where = f"schedule {schedule.name!r}"
    cron, every = schedule.cron, schedule.every
    if (cron is None) == (every is None):
        raise ConfigurationError(f"{where}: give exactly one of cron=... (a 5-field cron "
                                 f"expression) and every=... (seconds), got cron={_cut(cron)}, "
                                 f"every={_cut(every)}")
    if every is not None:
        if (not isinstance(every, (int, float)) or isinstance(every, bool)
                or not 0.001 <= every <= MAX_SECONDS or not math.isfinite(every)):
            raise ConfigurationError(f"{where}: every must be a number of seconds from 0.001 "
                                     f"to {MAX_SECONDS}, got {short_repr(every)}")
    if not isinstance(schedule.tz, str) or not schedule.tz:
        raise ConfigurationError(f"{where}: tz must be an IANA time zone name such as "
                                 f"'Europe/Paris', got {_cut(schedule.tz)}")
    zone(schedule.tz, where)
    if cron is not None:
        cron = check_cron(cron, where)
    if schedule.catch_up not in CATCH_UP:
        raise ConfigurationError(f"{where}: catch_up must be 'latest' or 'skip', got "
                                 f"{short_repr(schedule.catch_up)}")
    if not isinstance(schedule.overlap, bool):
        raise ConfigurationError(f"{where}: overlap must be True or False, got "
                                 f"{short_repr(schedule.overlap)}")
    if cron != schedule.cron:
        return dataclasses.replace(schedule, cron=cron)
    return schedule


def check_cron(cron: Any, where: str) -> str:
    """A valid 5-field cron expression (a nickname such as ``@daily`` expanded)."""
    if not isinstance(cron, str):
        raise ConfigurationError(f"{where}: cron must be a str such as '*/15 * * * *', "
                                 f"got {_cut(cron)}")
    expression = NICKNAMES.get(cron.strip().lower(), cron.strip())
    fields = expression.split()
    if len(fields) != 5:
        raise ConfigurationError(f"{where}: cron {_cut(cron)} has {len(fields)} field(s); give "
                                 f"5: minute hour day-of-month month day-of-week")
    CronSim, CronSimError = _cronsim(where)
    try:
        CronSim(expression, _dt.datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ConfigurationError(f"{where}: invalid cron {_cut(cron)}: "
                                 f"{_cut(str(exc), quoted=False)}") from None
    return " ".join(fields)


#: Characters of a cron expression or a time zone an error message repeats: a schedule
#: record read from Redis may hold one of any length (a planted 35 kB cron).
SHOWN_CHARS = 80


def _cut(value: Any, quoted: bool = True) -> str:
    """``value`` as an error message repeats it (its repr, or the text itself), its
    first SHOWN_CHARS characters and how long it is when it is longer."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        head = repr(value[:SHOWN_CHARS]) if quoted else value[:SHOWN_CHARS]
        return f"{head}... ({len(value):,} characters)"
    if not isinstance(value, str):
        return short_repr(value)  # (an int of thousands of digits: repr() raises)
    return repr(value) if quoted else value


def zone(name: str, where: str) -> _dt.tzinfo:
    """The time zone named ``name``.

    Raises:
        ConfigurationError: no such zone here (naming the schedule).
    """
    try:
        return _zone(name)
    except (ValueError, KeyError, OSError) as exc:
        raise ConfigurationError(
            f"{where}: unknown time zone {_cut(name)} ({type(exc).__name__}); give an IANA name "
            f"such as 'Europe/Paris' or 'UTC' (on a system without zone data, pip install "
            f"tzdata)") from None


@lru_cache(maxsize=256)
def _zone(name: str) -> _dt.tzinfo:
    import zoneinfo  # Python 3.9+; reads the system's zone data, else the tzdata package
    return zoneinfo.ZoneInfo(name)


def _cronsim(where: str) -> Tuple[Any, Any]:
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        raise ConfigurationError(f"{where}: cron schedules need the cronsim package: pip "
                                 f"install 'minitask[cron]' (every=... needs nothing)") from None
    return CronSim, CronSimError


def _period_ms(schedule: Schedule) -> int:
    """The period in whole milliseconds (at least 1)."""
    assert schedule.every is not None
    return max(1, round(schedule.every * 1000))


def _cron_instants(cron: str, tz: str, ms: int, *, forward: bool) -> Iterator[int]:
    """Instants (Unix ms) of the cron's wall-clock matches in ``tz``, walking from
    the wall-clock time at ``ms`` forwards (strictly after) or backwards (at or
    before), each wall-clock time at its first occurrence; times that do not
    exist are left out.

    cronsim is given naive wall-clock times, so its own DST handling (Debian
    cron's: a skipped time runs when clocks jump) stays out of the way.
    """
    CronSim, _ = _cronsim(f"cron {_cut(cron)}")
    where = zone(tz, f"cron {_cut(cron)}")
    wall = (_EPOCH + ms * _MS).astimezone(where).replace(tzinfo=None)
    start = wall if forward else wall.replace(microsecond=0) + _dt.timedelta(seconds=1)
    matches = CronSim(cron, start, reverse=not forward)
    while True:
        try:
            match = next(matches)
        except (StopIteration, OverflowError, ValueError):
            return
        instant = _first_instant(match, where)
        if instant is not None:
            yield instant


def _first_instant(wall: _dt.datetime, where: _dt.tzinfo) -> Optional[int]:
    """Unix ms of the first occurrence of the wall-clock time ``wall`` in ``where``,
    or None when clocks jump over it."""
    aware = wall.replace(tzinfo=where, fold=0)
    utc = aware.astimezone(_UTC)
    if utc.astimezone(where).replace(tzinfo=None) != wall:
        return None
    instant = (utc - _EPOCH) // _MS
    return instant if 0 <= instant <= MAX_MS else None


def describe(schedules: Sequence[Schedule]) -> List[Dict[str, Any]]:
    """The schedules as plain data, for ``minitask schedules --json``."""
    def stamp(value: Optional[_dt.datetime]) -> Optional[str]:
        return None if value is None else value.isoformat().replace("+00:00", "Z")

    return [{"name": s.name, "task": s.task, "queue": s.queue, "spec": s.spec, "tz": s.tz,
             "cron": s.cron, "every": s.every, "catch_up": s.catch_up, "overlap": s.overlap,
             "next_at": stamp(s.next_at), "last_at": stamp(s.last_at)} for s in schedules]
