"""What is running, scheduled and recently ended, across an app's queues, without
knowing any task id first: ``minitask inspect running|scheduled|recent`` and the
dashboard's JSON API.

Each listing reads bounded data: the front of each queue's leases or delayed set
(one script call per queue for each ``PEEK_MOST`` tasks, up to the listing's
limit), or each queue's capped record of recent outcomes (one round trip for every
queue). Nothing scans the keyspace. A task marked ``hide_args=True`` never has its arguments shown.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import functools
import re
import reprlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Pattern, Sequence, Set

from ..errors import ConfigurationError, DecodeError
from ..printable import shown_id
from ..stores.admin import PEEK_MOST as PEEK_MOST  # noqa: F401 (the dashboard's bound)
from ..stores.admin import Peeked
from ..stores.recent import MAX_LENGTH as MAX_LENGTH, STATES, RecentOutcome
from ..wire.message import MAX_NAME_BYTES, MAX_SECONDS, Progress, to_seconds
from ..wire.serializer import decode_message
from .operated import Operated, app_queues, meant, shown_queues

#: What a listing shows in place of the arguments of a ``hide_args=True`` task.
HIDDEN = "(hidden)"
#: Characters of a task's arguments a listing shows.
ARGS_CHARS = 80
#: ``--state`` words a recent listing takes: each state, and ``failed`` for both
#: kinds of failure (retried and dead).
STATE_WORDS = STATES + ("failed",)
#: The most tasks a listing returns (``limit``): as many as a queue's record can hold.
LIMIT_MOST = MAX_LENGTH
#: Characters a ``task`` filter (a name or a glob) may hold at most: as many as the
#: bytes of the longest task name (MAX_NAME_BYTES); a longer one is refused.
PATTERN_MOST = MAX_NAME_BYTES
#: Compiled globs kept for the next listing (the latest used). fnmatch's own cache
#: keeps 32,768 of any length: a dashboard asked for many long ones grew for good.
GLOBS_KEPT = 64

_REPR = reprlib.Repr()
_REPR.maxstring = 40
_REPR.maxother = 40


@dataclass(frozen=True)
class ListedTask:
    """A running (leased) or scheduled task, as a listing shows it.

    Attributes:
        task_id: its id.
        queue: its queue.
        state: ``running`` (leased by a worker: running, or prefetched and about
            to) or ``scheduled`` (delayed, or waiting for a retry).
        name: the task's name ('?' when its message cannot be read).
        args: its arguments as short text, cut to ARGS_CHARS, or HIDDEN.
        attempt: the attempt it is on (0: unknown).
        deliveries: hand-overs of the current attempt so far.
        priority: its priority (None: unknown).
        at: its lease deadline (running) or when it is due (scheduled); None
            when Redis holds no time minitask writes (``unreadable`` says why).
        enqueued_at: when it was sent.
        unreadable: '' or why ``at`` cannot be read: a score that is no time
            (inf, 1.5), or a lease deadline further ahead than any lease is
            taken for (MAX_SECONDS), naming the key; or why its message is not
            read: longer than minitask writes ("too large (N bytes, not read)").
    """

    task_id: str
    queue: str
    state: str
    name: str
    args: str
    attempt: int
    deliveries: int
    priority: Optional[int]
    at: Optional[_dt.datetime]
    enqueued_at: Optional[_dt.datetime]
    unreadable: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready: times as ISO 8601."""
        found = dict(vars(self))
        for name in ("at", "enqueued_at"):
            found[name] = None if found[name] is None else found[name].isoformat()
        return found


@dataclass(frozen=True)
class Listing:
    """One page of a listing, and how many tasks the queues hold in that state.

    ``total`` counts every running or scheduled task of the queues listed, before
    any filter; a recent listing's is the number of entries read, and its
    ``left_out`` the number of entries read but left out as no minitask's (each
    said in the log, naming its key).
    """

    tasks: List[Any]
    total: int
    left_out: int = 0


def hides_args(app: Operated, task_name: str) -> bool:
    """Whether the app registers ``task_name`` with ``hide_args=True``."""
    task = app.tasks.get(task_name)
    return task is not None and task.options.hide_args


def args_text(app: Operated, task_name: str, args: Sequence[Any],
              kwargs: Dict[str, Any]) -> str:
    """A task's arguments as short text for a listing, or HIDDEN (``hide_args``)."""
    if hides_args(app, task_name):
        return HIDDEN
    shown = [_REPR.repr(value) for value in args]
    shown += [f"{key}={_REPR.repr(value)}" for key, value in kwargs.items()]
    joined = ", ".join(shown)
    return joined if len(joined) <= ARGS_CHARS else joined[:ARGS_CHARS - 3] + "..."


def running(app: Operated, queues: Optional[Sequence[str]] = None, *,
            task: Optional[str] = None, limit: int = 100) -> Listing:
    """The tasks workers hold now (leased: running, or prefetched), soonest lease
    deadline first.

    Args:
        queues: the queues to look at; default: every queue of the app.
        task: a task name, or a glob (``billing.*``), to keep only those.
        limit: tasks returned at most (each queue is read PEEK_MOST tasks a round
            trip); a filter looks at the first PEEK_MOST tasks of each queue.

    Raises:
        ConfigurationError: a queue the app does not have, a limit that is not
            from 1 to LIMIT_MOST, or a task filter over PATTERN_MOST characters.
        BrokerError: Redis could not be reached.
    """
    return _listed(app, "leases", queues, task, limit)


def scheduled(app: Operated, queues: Optional[Sequence[str]] = None, *,
              task: Optional[str] = None, limit: int = 100) -> Listing:
    """The tasks due later (delayed, or waiting for a retry), soonest first.

    Args and Raises: as ``running``.
    """
    return _listed(app, "delayed", queues, task, limit)


def recent(app: Operated, queues: Optional[Sequence[str]] = None, *,
           task: Optional[str] = None, state: Optional[str] = None,
           limit: int = 100) -> Listing:
    """The last outcomes of the queues' tasks, newest first, from each queue's record
    (the app's ``recent_outcomes``; empty when it is 0).

    Args:
        queues: the queues to look at; default: every queue of the app.
        task: a task name, or a glob, to keep only those.
        state: ``succeeded``, ``retried``, ``dead``, ``cancelled``, or ``failed``
            (retried or dead), to keep only those.
        limit: entries returned at most. With a filter, every entry of the
            records is searched.

    Raises:
        ConfigurationError: an unknown state or queue, a limit that is not from 1
            to LIMIT_MOST, or a task filter over PATTERN_MOST characters.
        BrokerError: Redis could not be reached.
    """
    check_pattern(task)
    if state is not None and state not in STATE_WORDS:
        raise ConfigurationError(f"no state {state!r} among recent outcomes; states are "
                                 f"{', '.join(STATE_WORDS)}")
    names = _queues(app, queues, limit)
    filtered = task is not None or state is not None
    # with a filter, the whole record: its length is the writers' setting, not this app's
    # (the read shows its newest entries up to that setting: Redis may hold more)
    count = MAX_LENGTH if filtered else limit
    entries: List[RecentOutcome] = []
    by_queue, left_out = app.broker.recent.read(names, count, app.recent_outcomes)
    for found in by_queue.values():
        entries += found
    read = len(entries)
    wanted = {"retried", "dead"} if state == "failed" else {state}
    entries = [entry for entry in entries if (task is None or _matches(entry.name, task))
               and (state is None or entry.state in wanted)]
    entries.sort(key=lambda entry: entry.at, reverse=True)
    return Listing(entries[:limit], read, left_out)


def _listed(app: Operated, which: str, queues: Optional[Sequence[str]],
            task: Optional[str], limit: int) -> Listing:
    check_pattern(task)
    names = _queues(app, queues, limit)
    # a filter looks at the first PEEK_MOST of each queue; a listing without one, at as
    # many as it shows, read PEEK_MOST at a time (one page of messages held at once)
    count = PEEK_MOST if task is not None else limit
    found: List[ListedTask] = []
    total = 0
    now_ms = app.clock.now_ms()  # once: every lease of the listing is judged by one time
    far = _dt.datetime.max.replace(tzinfo=_dt.timezone.utc)
    for queue in names:
        seen: Set[str] = set()
        held: Optional[int] = None
        for held_now, peeked in app.broker.admin.peek_pages(queue, which, count):
            held = held_now if held is None else held
            for item in peeked:
                listed = _listed_task(app, queue, which, item, now_ms)
                if listed.task_id not in seen and (task is None or _matches(listed.name, task)):
                    seen.add(listed.task_id)
                    found.append(listed)
        total += held or 0
        # the first ``limit`` of the queues so far: what the listing keeps is bounded
        found.sort(key=lambda listed: listed.at or far)
        del found[limit:]
    return Listing(found, total)


def _listed_task(app: Operated, queue: str, which: str, item: Peeked,
                 now_ms: int) -> ListedTask:
    state = "running" if which == "leases" else "scheduled"
    # a member of the leases or the delayed set longer than any id (planted: 800,000
    # characters made a listing of that size) is shown cut, as a log line cuts it
    task_id = shown_id(item.task_id)
    at_ms, unreadable = item.at_ms, item.unreadable
    if item.too_large:  # its message is longer than minitask writes: not read
        unreadable = f"{unreadable}; {item.too_large}" if unreadable else item.too_large
    if which == "leases":
        far = lease_too_far(app, queue, at_ms, now_ms)
        at_ms, unreadable = (None, far) if far else (at_ms, unreadable)
    try:
        message = decode_message(item.body or b"")
    except DecodeError:
        return ListedTask(task_id, queue, state, "?", "", 0, item.deliveries, None,
                          _utc(at_ms), None, unreadable)
    return ListedTask(task_id, queue, state, message.task,
                      args_text(app, message.task, message.args, message.kwargs),
                      message.attempt, item.deliveries, message.priority, _utc(at_ms),
                      _utc(message.enqueued_at_ms), unreadable)


def lease_too_far(app: Operated, queue: str, at_ms: Optional[int], now_ms: int) -> str:
    """Why a lease deadline is no lease a worker took ('' when it may be one): further
    ahead of ``now_ms`` (the app's clock) than the longest ``visibility_timeout``
    (MAX_SECONDS)."""
    if at_ms is None or at_ms <= now_ms + MAX_SECONDS * 1000:
        return ""
    key = app.broker.admin.keys(queue).leases
    return (f"its lease deadline in key {key} is {_utc(at_ms):%Y-%m-%d}, further ahead than "
            f"any lease is taken for: unreadable")


def _queues(app: Operated, queues: Optional[Sequence[str]], limit: int) -> List[str]:
    if type(limit) is not int or not 1 <= limit <= LIMIT_MOST:
        raise ConfigurationError(f"limit must be a whole number from 1 to {LIMIT_MOST:,}, "
                                 f"got {limit!r}")
    if queues is None:  # bounded as status and the dashboard's pages are
        return shown_queues(app)[0]
    known = app_queues(app)
    unknown = [queue for queue in queues if queue not in known]
    if unknown:
        raise ConfigurationError(f"app {app.name!r} has no queue "
                                 f"{', '.join(map(repr, unknown))}{meant(unknown[0], known)}; "
                                 f"its queues: {', '.join(known) or 'none'}")
    return list(queues)


def check_pattern(pattern: Optional[str]) -> None:
    """Refuse a task filter longer than any task name can be (PATTERN_MOST
    characters): a ConfigurationError saying its length, not echoing it."""
    if pattern is not None and len(pattern) > PATTERN_MOST:
        raise ConfigurationError(f"task name or glob of {len(pattern):,} characters: no task "
                                 f"name is longer than {PATTERN_MOST:,} bytes; give at most "
                                 f"{PATTERN_MOST:,} characters")


def _matches(name: str, pattern: str) -> bool:
    """A task name against a name or a glob, case-sensitively (names are)."""
    return name == pattern or _glob(pattern).match(name) is not None


@functools.lru_cache(maxsize=GLOBS_KEPT)
def _glob(pattern: str) -> Pattern[str]:
    """A glob compiled, in a cache of its own that stays small (GLOBS_KEPT)."""
    return re.compile(fnmatch.translate(pattern))


def _utc(ms: Optional[int]) -> Optional[_dt.datetime]:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(to_seconds(ms), tz=_dt.timezone.utc)


def progress_of(app: Operated, tasks: Sequence[ListedTask]) -> List[Optional[Progress]]:
    """The last ``set_progress`` of each listed task (None: it reported none), in
    one round trip for all of them.

    Raises:
        BrokerError: Redis could not be reached.
    """
    return app.broker.progress.read_many([(item.queue, item.task_id) for item in tasks])
