"""Flow control options: checked when the decorator runs or the call is made.

``rate_limit`` and ``max_running`` are task options; ``limit_key``, ``debounce``
and ``expires`` are options of a call. What a call needs enforced is packed in
one line of text (``pack``), which the enqueue script keeps beside the message
and the fetch script reads (``stores/lua/flow.lua``): limits hold in Redis for
all workers together, never in a worker's memory.
"""
from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .errors import ConfigurationError
from .printable import short_repr
from .wire.message import MAX_MS, MAX_SECONDS, describe_char, to_ms, unprintable

#: The task options this module checks (fair queues: the ``group_*`` ones).
TASK_OPTIONS = frozenset({"rate_limit", "max_running", "group_by", "group_max_running",
                          "group_rate_limit"})
#: The call options this module checks.
CALL_OPTIONS = frozenset({"limit_key", "debounce", "expires", "group"})
#: Characters a group name may hold at most (it is part of Redis key names).
MAX_GROUP_LENGTH = 200
#: Characters a limit_key may hold at most (part of its limiter's Redis key names).
MAX_LIMIT_KEY_LENGTH = MAX_GROUP_LENGTH

_RATE = re.compile(r"\s*(\d+)\s*/\s*([smh])\s*")
_WINDOW_MS = {"s": 1000, "m": 60_000, "h": 3_600_000}
#: Starts a rate may allow per window, and slots max_running may hold: far beyond need.
MAX_COUNT = 1_000_000


@dataclass(frozen=True)
class TaskLimits:
    """A task's limits: ``rate_limit`` as given and read, and ``max_running``."""

    rate_limit: Optional[str] = None
    rate_count: int = 0
    rate_window_ms: int = 0
    max_running: int = 0

    @property
    def limited(self) -> bool:
        return bool(self.rate_count or self.max_running)


@dataclass(frozen=True)
class TaskGrouping:
    """A task's fair-queue options: ``group_by``, ``group_max_running`` and
    ``group_rate_limit`` (docs/guide/fair-queues.rst)."""

    group_by: Optional[str] = None
    max_running: int = 0
    rate_limit: Optional[str] = None
    rate_count: int = 0
    rate_window_ms: int = 0

    def given(self) -> Tuple[str, ...]:
        """The names of the options set (a periodic task refuses them: periodic.py)."""
        return tuple(name for name, value in (("group_by", self.group_by),
                                              ("group_max_running", self.max_running),
                                              ("group_rate_limit", self.rate_limit))
                     if value)


def task_grouping(options: Dict[str, Any], parameters: Any, where: str) -> TaskGrouping:
    """Read the ``group_*`` options of a decorator; ``parameters``: the function's.

    Raises:
        ConfigurationError: ``group_by`` naming no parameter of the function, or a bad
            ``group_max_running`` or ``group_rate_limit`` (a ValueError).
    """
    group_by = options.get("group_by")
    if group_by is not None and (not isinstance(group_by, str) or group_by not in parameters):
        raise ConfigurationError(f"{where}: group_by must name a parameter of the function "
                                 f"({', '.join(parameters) or 'it has none'}), got {group_by!r}")
    limits = task_limits({"rate_limit": options.get("group_rate_limit"),
                          "max_running": options.get("group_max_running")},
                         where, prefix="group_")
    return TaskGrouping(group_by, limits.max_running, limits.rate_limit, limits.rate_count,
                        limits.rate_window_ms)


def group_name(value: Any, where: str, what: str) -> str:
    """A group as it is stored: a str as it is, an int in decimal digits.

    Raises:
        ConfigurationError: any other type (bool included), an empty or too long
            name (an int of more than MAX_GROUP_LENGTH digits), or one holding a
            control character (a ValueError).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        # its size before str(): Python refuses an int of more than 4,300 digits with a
        # ValueError naming no task (a negative one's '-' counts as a character)
        if value >= 10 ** MAX_GROUP_LENGTH or value <= -10 ** (MAX_GROUP_LENGTH - 1):
            raise ConfigurationError(f"{where}: {what} is an int of {value.bit_length()} "
                                     f"bits, longer than {MAX_GROUP_LENGTH} digits")
        return str(value)
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{where}: {what} must be a non-empty str or an int, got "
                                 f"{short_repr(value)} ({type(value).__name__})")
    if len(value) > MAX_GROUP_LENGTH:
        raise ConfigurationError(f"{where}: {what} {value[:40]!r}... is longer than "
                                 f"{MAX_GROUP_LENGTH} characters")
    char = unprintable(value)
    if char is not None:
        raise ConfigurationError(f"{where}: {what} {value!r} holds {describe_char(char)}, a "
                                 f"control or format character; use printable characters")
    return value


def task_limits(options: Dict[str, Any], where: str, prefix: str = "") -> TaskLimits:
    """Read ``rate_limit`` and ``max_running`` from a decorator's options (their
    names start with ``prefix`` in the messages: ``group_`` for a group's).

    Raises:
        ConfigurationError: a rate that is not ``N/s``, ``N/m`` or ``N/h`` with N
            from 1, or a ``max_running`` that is not an int from 1 (a ValueError).
    """
    rate = options.get("rate_limit")
    count, window_ms = 0, 0
    if rate is not None:
        match = _RATE.fullmatch(rate) if isinstance(rate, str) else None
        if match is None or not 1 <= int(match.group(1)) <= MAX_COUNT:
            raise ConfigurationError(
                f"{where}: {prefix}rate_limit must be 'N/s', 'N/m' or 'N/h' with N from 1 to "
                f"{MAX_COUNT} (starts per second, minute or hour, across all workers), "
                f"got {short_repr(rate)}")
        count, window_ms = int(match.group(1)), _WINDOW_MS[match.group(2)]
    most = options.get("max_running")
    if most is not None and (not isinstance(most, int) or isinstance(most, bool)
                             or not 1 <= most <= MAX_COUNT):
        raise ConfigurationError(f"{where}: {prefix}max_running must be an int from 1 to "
                                 f"{MAX_COUNT} (tasks running at once, across all workers), "
                                 f"got {short_repr(most)}")
    return TaskLimits(rate, count, window_ms, most or 0)


def check_limit_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"{where}: limit_key must be a non-empty str, got "
                                 f"{short_repr(key)}")
    if len(key) > MAX_LIMIT_KEY_LENGTH:
        raise ConfigurationError(f"{where}: limit_key {key[:40]!r}... is {len(key):,} "
                                 f"characters, longer than {MAX_LIMIT_KEY_LENGTH} (it is part "
                                 f"of Redis key names, as a group is)")
    char = unprintable(key)
    if char is not None:
        raise ConfigurationError(f"{where}: limit_key {key!r} holds {describe_char(char)}, a "
                                 f"control or format character; use printable characters")
    return key


def debounce_ms(debounce: Any, task_id: Optional[str], timed: bool, where: str) -> int:
    """The debounce in ms, checked: it needs a ``task_id`` and no ``delay`` or ``eta``.

    Raises:
        ConfigurationError: not a finite number of seconds above 0, no task_id, or
            a delay or eta given too (a ValueError).
    """
    if (not isinstance(debounce, (int, float)) or isinstance(debounce, bool)
            or not 0 < debounce <= MAX_SECONDS or not math.isfinite(debounce)):
        raise ConfigurationError(f"{where}: debounce must be a finite number of seconds "
                                 f"above 0, got {short_repr(debounce)}")
    if task_id is None:
        raise ConfigurationError(f"{where}: debounce={debounce!r} needs a task_id: the id "
                                 f"whose scheduled call a later call replaces")
    if timed:
        raise ConfigurationError(f"{where}: debounce sets the due time itself (debounce "
                                 f"seconds after the last call); give no delay or eta with it")
    return to_ms(debounce)


def expires_ms(expires: Any, now_ms: int, where: str) -> int:
    """The Unix ms after which a call that has not started never runs.

    Args:
        expires: seconds from now (above 0), or an aware datetime still to come.

    Raises:
        ConfigurationError: a number that is not finite and above 0, a naive
            datetime, or a time already past (a ValueError).
    """
    if isinstance(expires, _dt.datetime):
        if expires.tzinfo is None or expires.utcoffset() is None:
            raise ConfigurationError(f"{where}: expires {expires!r} is a naive datetime; "
                                     f"give it a time zone")
        at_ms = to_ms(expires.timestamp())
        if at_ms <= now_ms:
            raise ConfigurationError(f"{where}: expires {expires!r} has passed already")
        return min(at_ms, MAX_MS)
    if (not isinstance(expires, (int, float)) or isinstance(expires, bool)
            or not 0 < expires <= MAX_SECONDS or not math.isfinite(expires)):
        raise ConfigurationError(f"{where}: expires must be a number of seconds above 0 or "
                                 f"an aware datetime, got {short_repr(expires)}")
    return min(now_ms + to_ms(expires), MAX_MS)


def pack(task_name: str, limits: TaskLimits, *, limit_key: Optional[str] = None,
         expires_at_ms: int = 0, debounce: bool = False, group: Optional[str] = None,
         grouping: TaskGrouping = TaskGrouping()) -> Optional[str]:
    """The flow spec of one call (flow.lua reads it), or None when it needs none;
    a grouped call's goes on with its group's limits and its group, last."""
    if not (limits.limited or expires_at_ms or debounce or group is not None):
        return None
    limiter = ""
    if limits.limited:
        limiter = f"{len(task_name)}:{task_name}"
        if limit_key is not None:
            limiter += f":{limit_key}"
    spec = (f"{limiter}\n{limits.rate_count}\n{limits.rate_window_ms}\n{limits.max_running}\n"
            f"{expires_at_ms}\n{int(debounce)}")
    if group is not None:
        spec += (f"\n{grouping.max_running}\n{grouping.rate_count}\n"
                 f"{grouping.rate_window_ms}\n{group}")
    return spec


def call_flow(task_name: str, limits: TaskLimits, options: Dict[str, Any], *,
              task_id: Optional[str], timed: bool, now_ms: int, where: str,
              grouping: TaskGrouping = TaskGrouping()) -> Tuple[Optional[str], Optional[int]]:
    """The flow spec of an ``apply_async`` call, and its due time when debounced.

    ``options`` holds the call's ``limit_key``, ``debounce``, ``expires`` and
    ``group`` (None: not given; the group already checked, as ``group_name``
    makes it); ``timed``: a delay or eta was given too.

    Raises:
        ConfigurationError: a bad value (a ValueError); nothing is sent.
    """
    key = options.get("limit_key")
    if key is not None:
        check_limit_key(key, where)
    group = options.get("group")
    due_ms: Optional[int] = None
    debounce = options.get("debounce")
    if debounce is not None:
        due_ms = now_ms + debounce_ms(debounce, task_id, timed, where)
    expires = options.get("expires")
    at_ms = 0 if expires is None else expires_ms(expires, now_ms, where)
    return pack(task_name, limits, limit_key=key, expires_at_ms=at_ms,
                debounce=debounce is not None, group=group, grouping=grouping), due_ms
