"""Schedules added, removed and listed at run time, for every worker of the app."""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..broker.durability import keep_unconfirmed
from ..errors import BrokerError, ConfigurationError, DurabilityError
from ..options import check_priority
from ..periodic import Schedule, build as build_schedule, schedule_named
from ..printable import printable, short_repr
from ..sending import check_queue_name
from ..stores.schedules import Place
from ..task import Task
from .operated import Operated, app_queues


def add_schedule(app: Operated, name: str, task: Union[Task[Any, Any], str], *,
                 cron: Optional[str] = None, every: Optional[float] = None,
                 tz: str = "UTC", args: Sequence[Any] = (),
                 kwargs: Optional[Dict[str, Any]] = None, catch_up: str = "latest",
                 overlap: bool = True, queue: Optional[str] = None,
                 priority: Optional[int] = None) -> Schedule:
    """``Minitask.add_schedule``: add or replace a schedule; returns it as stored."""
    with schedule_named(name):  # every error says which schedule it is about
        return _add_schedule(app, name, task, cron=cron, every=every, tz=tz, args=args,
                             kwargs=kwargs, catch_up=catch_up, overlap=overlap, queue=queue,
                             priority=priority)


def _add_schedule(app: Operated, name: str, task: Union[Task[Any, Any], str], *,
                  cron: Optional[str], every: Optional[float], tz: str, args: Sequence[Any],
                  kwargs: Optional[Dict[str, Any]], catch_up: str, overlap: bool,
                  queue: Optional[str], priority: Optional[int]) -> Schedule:
    registered = app.tasks.get(task) if isinstance(task, str) else task
    if not isinstance(registered, Task):
        raise ConfigurationError(f"schedule {name!r}: task must be a task of this app or "
                                 f"its name, got {task!r}; known: "
                                 f"{', '.join(sorted(app.tasks)) or '(none)'}")
    target = registered.queue if queue is None else queue
    check_queue_name(target, f"schedule {name!r}")
    level = registered.priority if priority is None else check_priority(
        priority, f"schedule {name!r}")
    schedule = build_schedule(name, registered.name, registered.func, cron=cron,
                              every=every, tz=tz, args=args, kwargs=kwargs,
                              catch_up=catch_up, overlap=overlap, queue=target,
                              priority=level, max_message_bytes=app.max_message_bytes,
                              types=app.broker.types,
                              group_options=registered.options.grouping.given())
    store = app.broker.schedules
    with keep_unconfirmed() as unconfirmed:
        # Saved first, then given up by its other queues (not atomic together: other
        # hash tags): a save Redis refuses leaves the schedule where it was, and a
        # removal refused after it leaves it in two queues, said, never in none.
        app.broker.queues.register_queues([target])
        store.save(schedule, schedule.next_after(app.clock.now_ms()))
        for other in app_queues(app):
            if other != target:
                try:
                    store.remove(other, name, app.clock.now_ms())
                except BrokerError as exc:
                    raise BrokerError(f"schedule {name!r} was saved on queue {target!r}, "
                                      f"but queue {other!r} still holds it: {exc}",
                                      reason=exc.reason) from exc
    said_unconfirmed(unconfirmed, f"schedule {name!r}")
    found = store.one(target, name)
    # None: removed (or replaced by one of a newer minitask) by another process meanwhile
    return schedule if found is None else found


def remove_schedule(app: Operated, name: str) -> bool:
    """``Minitask.remove_schedule``: False when no schedule has this name."""
    if not isinstance(name, str) or not name:  # (Redis would have refused None: "the broker")
        raise ConfigurationError(f"remove_schedule: name must be a schedule's name, a "
                                 f"non-empty str, got {short_repr(name)}")
    decorated = app.periodic_schedules.pop(name, None)
    removed = False
    with keep_unconfirmed() as unconfirmed:  # every queue asked, even with a replica behind
        for queue in app_queues(app):
            removed = app.broker.schedules.remove(
                queue, name, app.clock.now_ms(),
                decorated is not None and decorated.queue == queue) or removed
    said_unconfirmed(unconfirmed, f"schedule {name!r}")
    return removed


def said_unconfirmed(unconfirmed: List[DurabilityError], what: str) -> None:
    """Raise one DurabilityError for the writes of ``what`` (all made: Redis wrote each)
    that replicas did not confirm in time, if any."""
    if unconfirmed:
        first = unconfirmed[0]
        raise DurabilityError(
            f"{what}: every write was made, but {len(unconfirmed)} of them were not "
            f"confirmed by replicas in time (the first: {first})",
            task_id=None, confirmed=first.confirmed) from first


def schedules(app: Operated) -> List[Schedule]:
    """``Minitask.schedules``: every schedule of the app, by name. It reads every
    schedule (a page at a time) and holds them all: the CLI and the dashboard page
    through them with ``schedule_page`` instead."""
    return schedule_listing(app)[0]


def schedule_listing(app: Operated) -> Tuple[List[Schedule], List[Dict[str, str]]]:
    """Every schedule of the app, by name; and each schedule record that cannot be
    listed (``minitask schedules`` shows them rather than hide them): its ``key``, its
    ``field`` ("" when the whole key is unreadable) and the ``problem``."""
    found: Dict[Tuple[str, str], Schedule] = {}
    unreadable: List[Dict[str, str]] = []
    for page in schedule_pages(app, schedule_counts(app, app_queues(app))):
        # a schedule that fired while it was read may come twice: its later reading kept
        found.update(((schedule.queue, schedule.name), schedule) for schedule in page.schedules)
        unreadable += page.unreadable
    return sorted(found.values(), key=lambda schedule: schedule.name), unreadable


#: A score as Redis writes one (%.17g), which its ZCOUNT reads back exactly.
_SCORE = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?")
#: Schedules a page holds by default (the dashboard's pages, like its listings).
PAGE_SIZE = 50
#: Script calls one page makes at most (one per queue it starts, and one more when a
#: queue's schedules with no tick follow those with one): a page of fewer is cut
#: there, and the next page goes on where it stopped.
PAGE_CALLS = 16


@dataclass(frozen=True)
class SchedulePage:
    """A page of an app's schedules: queue by queue (by name), in each those with a
    next tick soonest first, then those with none."""

    schedules: List[Schedule]
    #: the records it met that cannot be listed: key, field ("" the whole key), problem
    unreadable: List[Dict[str, str]]
    #: schedule records it read (listed or unreadable)
    fields: int
    #: where the next page starts (give it as ``after``); None: this is the last
    next: Optional[str]
    #: '' or why this page holds fewer than asked though it is not the last: it made
    #: its PAGE_CALLS reads first (past 80,000 schedules with a next run, those with
    #: none are looked for among them all: probe 10, L1); ``next`` goes on from there
    stopped: str = ""


def schedule_counts(app: Operated, queues: Sequence[str]) -> Dict[str, int]:
    """How many schedule records each of ``queues`` holds (one HLEN each, in one round
    trip); -1 for a key of another type (a page reports it as unreadable)."""
    return app.broker.schedules.counts(sorted(queues))


def schedule_page(app: Operated, counts: Dict[str, int], after: Optional[str] = None,
                  limit: int = PAGE_SIZE) -> SchedulePage:
    """The page of about ``limit`` schedules of the queues of ``counts``
    (``schedule_counts``; those that hold none are skipped) that starts at ``after``
    (a page's ``next``; None: the first). What it reads is bounded by ``limit`` and
    PAGE_CALLS, however many schedules there are: a page never reads them all.

    Raises:
        ConfigurationError: ``after`` is no place a page gave.
    """
    queue, place = _place(after) if after else ("", Place())
    store = app.broker.schedules
    found: List[Schedule] = []
    unreadable: List[Dict[str, str]] = []
    fields = calls = 0
    for name in sorted(counts):
        if name < queue or not counts[name]:
            continue
        if name > queue:
            queue, place = name, Place()
        nxt: Optional[Place] = place
        dangling = [0, 0]  # ticks naming no record passed over, of them left (not removed)
        while nxt is not None and len(found) + len(unreadable) < limit and calls < PAGE_CALLS:
            calls += 1
            page = store.page(name, nxt, limit - len(found) - len(unreadable))
            found += page.schedules
            unreadable += [{"key": key, "field": field, "problem": problem}
                           for key, field, problem in page.unreadable]
            fields += page.fields
            dangling[0] += page.dangling
            dangling[1] += page.dangling_kept
            nxt = page.next
        store.said_dangling(name, *dangling)
        if nxt is not None:
            listed = len(found) + len(unreadable)
            return SchedulePage(found, unreadable, fields, _cursor(name, nxt),
                                "" if listed >= limit else
                                _stopped(name, counts[name], listed, nxt.phase, dangling))
    return SchedulePage(found, unreadable, fields, None)


def _stopped(queue: str, records: int, listed: int, phase: str, dangling: List[int]) -> str:
    """What a page that ends short of its size though it is not the last says: why,
    as it happened (ticks naming no record passed over, or schedules with no next run
    looked for among every record)."""
    head = (f"this page stopped early, with {listed} schedule(s): a page makes at most "
            f"{PAGE_CALLS} reads, a bounded number of entries each")
    tail = "; the next page goes on from where this one stopped"
    if phase == "armed":
        passed, kept = dangling
        what = (f"; it passed over {passed:,} tick(s) of queue {printable(queue)!r} that name "
                f"no schedule record (left by a schedule deleted by hand, or planted)")
        done = (f", and could not remove {kept:,} of them (Redis refused the write: "
                f"each listing passes over them again)" if kept else
                ", and removed them" if passed else "")
        return head + what + done + tail
    return (head + f" (past the schedules with a next run, those with none are looked for "
            f"among all {records:,} records of queue {printable(queue)!r})" + tail)


def schedule_pages(app: Operated, counts: Dict[str, int],
                   limit: int = 500) -> Iterator[SchedulePage]:
    """Every page of the schedules of the queues of ``counts``, read as each is asked
    for (memory: one page)."""
    after: Optional[str] = None
    while True:
        page = schedule_page(app, counts, after, limit)
        yield page
        if page.next is None:
            return
        after = page.next


#: The longest page cursor read (characters): one a page gave is shorter (a
#: queue name, a tick and a schedule name, each bounded).
_CURSOR_MOST = 8192


def _cursor(queue: str, place: Place) -> str:
    """A page's place as text for a URL (base64 of JSON: a name may hold any byte)."""
    packed = json.dumps([queue, place.phase, place.at,
                         base64.b64encode(place.name).decode("ascii")])
    return base64.urlsafe_b64encode(packed.encode()).decode("ascii").rstrip("=")


def _place(cursor: str) -> Tuple[str, Place]:
    """The queue and place of a ``_cursor``, checked: it reaches Redis (a cursor HSCAN
    refuses, or JSON nested past the parser's depth, is the caller's error, not
    Redis's)."""
    try:
        if len(cursor) > _CURSOR_MOST:
            raise ValueError(f"{len(cursor)} characters")
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not (isinstance(decoded, list) and len(decoded) == 4
                and all(isinstance(part, str) for part in decoded)):
            raise ValueError("not four strings")
        queue, phase, at, name = decoded
        # armed: a tick as Redis wrote it (ZCOUNT reads it back); unarmed: "n" (by
        # name, after ``name``) or an HSCAN cursor, which Redis keeps below 2**64
        if phase == "armed" and at and not (_SCORE.fullmatch(at) or at in ("inf", "-inf")):
            raise ValueError(at)
        unarmed_cursor = phase == "unarmed" and (at == "n" or re.fullmatch(
            "[0-9]{1,20}", at) is not None and int(at) < 2 ** 64)
        if not (phase == "armed" or unarmed_cursor):
            raise ValueError(phase)
        check_queue_name(queue)
        return queue, Place(phase, at, base64.b64decode(name, validate=True))
    except (ValueError, TypeError, AttributeError, RecursionError, ConfigurationError) as exc:
        raise ConfigurationError(
            f"schedules: {printable(cursor[:80])!r} is no place a page of schedules gave "
            f"(ask again from the first page)") from exc
