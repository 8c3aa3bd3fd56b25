"""Task options and the checks they share with calls: done when the decorator
runs (or a call is made), before anything is sent."""
from __future__ import annotations

import inspect
import math
import os
import sys
from binascii import b2a_base64
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Type

from .errors import ConfigurationError
from .printable import short_repr
from .limits import TASK_OPTIONS as _LIMIT_OPTIONS
from .limits import TaskGrouping, TaskLimits, task_grouping, task_limits
from .wire.message import (MAX_ID_BYTES, MAX_NAME_BYTES, MAX_RETRIES, MAX_SECONDS,
                           describe_char, unprintable)

TASK_OPTIONS = frozenset({"name", "queue", "priority", "retries", "retry_backoff",
                          "retry_backoff_max", "retry_on", "timeout", "soft_timeout",
                          "ignore_result", "result_ttl", "broadcast", "hide_args"}) | _LIMIT_OPTIONS
CALL_OPTIONS = frozenset({"queue", "priority", "delay", "eta", "task_id"})
#: A task's route by its name: the pattern that matched (None: none) and its options.
Router = Callable[[str], Tuple[Optional[str], Mapping[str, Any]]]
#: Options given in seconds, checked to be finite, >= 0 and at most MAX_SECONDS.
_SECONDS_OPTIONS = ("retry_backoff", "retry_backoff_max", "timeout", "soft_timeout",
                    "result_ttl")
#: Those of them that must be above 0: a result kept 0 s is gone as it is written, a
#: time limit of 0 s kills every call (no limit is None).
_ABOVE_ZERO = ("timeout", "result_ttl")


#: ``base64.urlsafe_b64encode``'s alphabet from the standard one.
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def new_task_id() -> str:
    """22 url-safe characters of randomness: shorter than a hex uuid4, just as unique.

    ``base64.urlsafe_b64encode(os.urandom(16))[:22]``, without its two Python calls
    (every ``delay()`` makes an id)."""
    return b2a_base64(os.urandom(16), newline=False)[:22].translate(_URL_SAFE).decode("ascii")


def positional_arity(signature: inspect.Signature) -> Optional[Tuple[int, int]]:
    """(required, total) when every parameter may be passed by position: then a call
    with positional arguments only binds exactly when their count is in that range,
    and ``Signature.bind``, a large share of ``delay()``, can be skipped."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = list(signature.parameters.values())
    if any(p.kind not in positional for p in parameters):
        return None
    required = sum(1 for p in parameters if p.default is inspect.Parameter.empty)
    return required, len(parameters)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A number that is not NaN nor an infinity: an int of any size is one
    (``math.isfinite`` of an int too big for a float raises OverflowError)."""
    return is_number(value) and (isinstance(value, int) or math.isfinite(value))


def check_clock(clock: Any, where: str) -> Any:
    """``clock=`` as given (None: the real clock): an object with a ``now_ms()`` method;
    anything else is refused here, naming the option (a string was taken, and the
    first ``delay()`` failed with a raw AttributeError)."""
    if clock is not None and not callable(getattr(clock, "now_ms", None)):
        raise ConfigurationError(f"{where}: clock must be an object with a now_ms() method "
                                 f"(or None, for the real clock), got {type(clock).__name__} "
                                 f"{clock!r:.80}")
    return clock


def check_seconds(value: Any, what: str, where: str) -> float:
    """A duration option: a finite number of seconds from 0 to MAX_SECONDS."""
    if not is_finite(value) or not 0 <= value <= MAX_SECONDS:
        raise ConfigurationError(f"{where}: {what} must be a finite number of seconds from 0 "
                                 f"to {MAX_SECONDS} (100 years), got {short_repr(value)}")
    return float(value)


def check_positive_seconds(value: Any, what: str, where: str) -> float:
    """A duration that must be above 0 (a ttl, a time limit): a finite number of
    seconds above 0 and at most MAX_SECONDS."""
    if not is_finite(value) or not 0 < value <= MAX_SECONDS:
        raise ConfigurationError(f"{where}: {what} must be a finite number of seconds above "
                                 f"0, at most {MAX_SECONDS} (100 years), got "
                                 f"{short_repr(value)}")
    return float(value)


def check_soft_timeout(soft: Optional[float], hard: Optional[float], where: str) -> None:
    """A soft limit must come before the end: above 0, and below ``timeout`` if any."""
    if soft is None:
        return
    if soft <= 0:
        raise ConfigurationError(f"{where}: soft_timeout must be above 0 seconds, got {soft!r}")
    if hard is not None and soft >= hard:
        raise ConfigurationError(f"{where}: soft_timeout ({soft:g} s) must be below timeout "
                                 f"({hard:g} s), to leave the task time to clean up before "
                                 f"the hard limit")


def check_text(value: Any, what: str, where: str, fix: str = "use printable characters") -> str:
    """A task name or task id: a non-empty str that cannot forge a log line."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{where}: {what} must be a non-empty str, got "
                                 f"{short_repr(value)}")  # read from Redis, maybe
    char = unprintable(value)
    if char is not None:
        raise ConfigurationError(f"{where}: {what} {value!r} holds {describe_char(char)}, a "
                                 f"control or format character; {fix}")
    return value


def check_name_size(name: str) -> None:
    """Refuse a task name over ``MAX_NAME_BYTES``, which a worker would refuse to run."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ConfigurationError(f"task {name[:40]!r}...: its name is over {MAX_NAME_BYTES} "
                                 f"bytes; choose a shorter one (name=...)")


#: Bytes (UTF-8) a chosen task id may hold at most (wire.message.MAX_ID_BYTES).
MAX_TASK_ID_BYTES = MAX_ID_BYTES


def check_task_id(value: Any, where: str, what: str = "task_id",
                  fix: str = "choose a shorter id") -> str:
    """A chosen task id (or ``what``, a group's id): ``check_text``'s, and at most
    ``MAX_TASK_ID_BYTES`` bytes; a refusal ends with ``fix``."""
    task_id = check_text(value, what, where)
    size = len(task_id.encode("utf-8", "surrogatepass"))
    if size > MAX_TASK_ID_BYTES:
        raise ConfigurationError(f"{where}: {what} {task_id[:40]!r}... is {size:,} bytes "
                                 f"(UTF-8), longer than {MAX_TASK_ID_BYTES} bytes, the most "
                                 f"an id may hold (wire.message.MAX_ID_BYTES); {fix}")
    return task_id


def check_priority(priority: Any, where: str) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 9:
        raise ConfigurationError(f"{where}: priority must be an int from 0 to 9 "
                                 f"(9 runs first), got {short_repr(priority)}")
    return priority


def module_name_of(func: Callable[..., Any]) -> str:
    """The module name ``func`` would have if imported, even when run as a script."""
    module = func.__module__
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name).rsplit(".__main__", 1)[0]
    path = os.path.abspath(getattr(main, "__file__", "") or "")
    for root in sorted((os.path.abspath(p) for p in sys.path if p), key=len, reverse=True):
        if path.startswith(root + os.sep):
            relative = os.path.splitext(os.path.relpath(path, root))[0]
            return relative.replace(os.sep, ".")
    return os.path.splitext(os.path.basename(path))[0] or module


@dataclass(frozen=True)
class TaskOptions:
    """A task's resolved options; checked once, when the decorator runs."""

    name: str
    queue: str
    priority: int = 5
    retries: int = 0
    retry_backoff: float = 1.0
    retry_backoff_max: float = 600.0
    retry_on: Tuple[Type[BaseException], ...] = ()
    timeout: Optional[float] = None
    #: Seconds after which SoftTimeLimitExceeded is raised inside the attempt.
    soft_timeout: Optional[float] = None
    ignore_result: bool = False
    result_ttl: float = 86400.0
    #: Each call runs once per subscriber of the queue (``broadcast.py``).
    broadcast: bool = False
    #: ``rate_limit`` and ``max_running`` (limits.py)
    limits: TaskLimits = TaskLimits()
    #: ``group_by``, ``group_max_running``, ``group_rate_limit`` (limits.py)
    grouping: TaskGrouping = TaskGrouping()
    #: The pattern of the app's route that gave it its queue or priority, if any.
    route: Optional[str] = None
    #: Its arguments hold secrets: no operator view (CLI, dashboard) shows them.
    hide_args: bool = False

    @classmethod
    def build(cls, func: Callable[..., Any], default_queue: str, result_ttl: float,
              options: Dict[str, Any], router: Optional[Router] = None) -> "TaskOptions":
        """Check a decorator's options; the task's own ``queue`` and ``priority``
        win over its route's (``router``), which win over the app's defaults."""
        unknown = sorted(set(options) - TASK_OPTIONS)
        name = options.get("name")
        qualname = getattr(func, "__qualname__", None)  # (none: a partial, a callable object)
        on = (f"@app.task on {qualname!r}" if isinstance(qualname, str)
              else f"@app.task on a {type(func).__name__} object")
        if name is None:
            if not isinstance(qualname, str):
                raise ConfigurationError(f"{on}: it has no __qualname__ to name the task after; "
                                         f"pass name=... (a functools.partial or a callable "
                                         f"object runs as a task once named)")
            name = check_text(f"{module_name_of(func)}.{qualname}", "default name", on,
                              "pass name=...")
        else:
            check_text(name, "name", on)
        where = f"task {name!r}"
        if unknown:
            raise ConfigurationError(f"{where}: unknown option(s) {', '.join(unknown)}; "
                                     f"valid options are {', '.join(sorted(TASK_OPTIONS))}")
        retries = options.get("retries", 0)
        if (not isinstance(retries, int) or isinstance(retries, bool)
                or not 0 <= retries <= MAX_RETRIES):
            raise ConfigurationError(f"{where}: retries must be an int from 0 to "
                                     f"{MAX_RETRIES}, got {short_repr(retries)}")
        retry_on = options.get("retry_on")
        if retry_on is None:
            retry_on = (Exception,) if retries > 0 else ()
        elif isinstance(retry_on, type):
            retry_on = (retry_on,)
        elif not isinstance(retry_on, (tuple, list)):
            raise ConfigurationError(f"{where}: retry_on must be exception types, "
                                     f"got {short_repr(retry_on)}")
        retry_on = tuple(retry_on)
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry_on):
            raise ConfigurationError(f"{where}: retry_on must be exception types, "
                                     f"got {short_repr(retry_on)}")
        seconds = {field_name: (check_positive_seconds if field_name in _ABOVE_ZERO
                                else check_seconds)(options[field_name], field_name, where)
                   for field_name in _SECONDS_OPTIONS if options.get(field_name) is not None}
        check_soft_timeout(seconds.get("soft_timeout"), seconds.get("timeout"), where)
        if "result_ttl" not in seconds:
            seconds["result_ttl"] = check_positive_seconds(result_ttl, "result_ttl (the app's)",
                                                           where)
        ignore_result = options.get("ignore_result", False)
        if not isinstance(ignore_result, bool):
            raise ConfigurationError(f"{where}: ignore_result must be True or False, "
                                     f"got {short_repr(ignore_result)}")
        pattern, routed = (None, {}) if router is None else router(name)
        if routed and all(options.get(key) is not None for key in routed):
            pattern = None  # the decorator set all the route would: it does not apply
        queue = options.get("queue") or routed.get("queue") or default_queue
        hide_args = options.get("hide_args", False)
        if not isinstance(hide_args, bool):
            raise ConfigurationError(f"{where}: hide_args must be True or False, "
                                     f"got {short_repr(hide_args)}")
        broadcast = options.get("broadcast", False)
        if not isinstance(broadcast, bool):
            raise ConfigurationError(f"{where}: broadcast must be True or False, "
                                     f"got {short_repr(broadcast)}")
        limits = task_limits(options, where)
        if broadcast and limits.limited:
            raise ConfigurationError(f"{where}: a broadcast task takes no rate_limit or "
                                     f"max_running (each subscriber runs every call)")
        grouping = task_grouping(options, inspect.signature(func).parameters, where)
        if broadcast and grouping != TaskGrouping():
            raise ConfigurationError(f"{where}: a broadcast task takes no group_by, "
                                     f"group_max_running or group_rate_limit (each "
                                     f"subscriber runs every call, in order)")
        return cls(
            name=name, queue=queue,
            priority=check_priority(options.get("priority", routed.get("priority", 5)), where),
            retries=retries,
            retry_backoff=seconds.get("retry_backoff", 1.0),
            retry_backoff_max=seconds.get("retry_backoff_max", 600.0),
            retry_on=retry_on,
            timeout=seconds.get("timeout"),
            soft_timeout=seconds.get("soft_timeout"),
            ignore_result=ignore_result,
            result_ttl=seconds["result_ttl"],
            broadcast=broadcast, limits=limits, grouping=grouping, route=pattern,
            hide_args=hide_args)
