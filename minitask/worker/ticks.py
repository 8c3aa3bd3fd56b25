"""Ticks: the worker fires the due ticks of the schedules of the queues it serves.

There is no beat process and no leader: every worker keeps a copy of its
queues' armed schedules (a record and a tick each: records with no tick are
never fired, ticks with no record name nothing; neither is read, so planted ones
cost it nothing), treats the earliest tick as one more due time to wake up for
(beside the queues' own), and fires what is due with one atomic script
(``stores/schedules.py``). Any number of workers may race for a tick; the first
arms the next tick and enqueues the run, the others find the tick moved on.

The copy is read when the worker starts, when a wait ends early without
work (a schedule change pushes wake tokens to its queue), when a fire finds
the schedule changed, and, while the worker stays busy, every
``REFRESH_MS``. An idle worker with nothing due makes no call for it; a
worker draining tasks pays one clock read per task and one read of the
schedules every ``REFRESH_MS``.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..broker.durability import keep_unconfirmed
from ..broker.packing import ScriptCall
from ..errors import BrokerError, DecodeError
from ..log_throttle import LogThrottle
from ..periodic import NewerRecord, Schedule, from_record
from ..printable import cut_text, own_logger, printable
from ..stores.foreign import foreign, ignored
from ..stores.queue import FetchResult
from ..stores.schedules import MAX_RECORD_BYTES, Armed, Fired, Run
from ..wire.serializer import encode_message
from .host import Host
from .leases import Holdings, Job
from .lost_schedules import write_back
from .sources import QueueSource
from .stop import Stop

logger = own_logger(__name__)

#: How often a busy worker reads its queues' schedules again (ms), to hear of
#: changes that idle workers hear of at once.
REFRESH_MS = 5000
#: How far two workers' clocks may differ (ms) before a tick one armed is re-armed by
#: the other: a tick later than the tick after next, from now plus this, was armed by
#: a clock far ahead (an hour ahead would silence an hourly schedule for an hour) or
#: was no tick minitask wrote.
SKEW_MS = 60_000
#: A wait that ends this much before it was planned to (seconds) was ended by a wake token.
_EARLY = 0.002
#: Unreadable schedule records named in the line that says so, at most; that line is
#: said again (when they change) at most once this many seconds, per queue.
UNREADABLE_SHOWN = 3
UNREADABLE_SAY_S = 60.0


class TickSource:
    """Fires due ticks of the queues' schedules, then hands out work from the queues."""

    def __init__(self, host: Host, queues: QueueSource, holdings: Holdings, stop: Stop,
                 decorated: Sequence[Schedule] = ()) -> None:
        self._host = host
        self._queues = queues
        self._holdings = holdings
        self._stop = stop
        self._decorated = list(decorated)
        #: (queue, schedule name) -> the schedule as last read, with its armed tick
        self._entries: Dict[Tuple[str, str], Armed] = {}
        #: queue -> what was last said of its unreadable records (their count and first
        #: names), said at most once a UNREADABLE_SAY_S: one line a queue, never one a record
        self._said: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
        self._unreadable = LogThrottle(UNREADABLE_SAY_S)
        self._stale = True       # read the schedules before the first look
        self._busy = True        # work was handed out since the last read (or none read)
        self._refresh_at = 0     # ms: when a busy worker reads the schedules again
        self._check_at = 0       # ms: when next_job must look at the schedules
        self._queued = False     # the last look fired a run into a queue
        #: entries whose armed tick is no tick minitask wrote: re-armed at the next look
        self._rearm: List[Tuple[Tuple[str, str], Armed]] = []
        #: (name, its queues) of the schedules several of this worker's queues held at the
        #: last read, each said once (as many as there are, not every one ever seen)
        self._doubled: Set[Tuple[str, Tuple[str, ...]]] = set()
        #: ms: since when this worker fires ticks (missed ticks after it were late here)
        self._up_ms: Optional[int] = None

    def _now(self) -> int:
        """Now by Redis's clock as far as this worker knows it (ticks are shared): the
        app's clock, which a worker sets to Redis's time (worker/redis_time.py)."""
        return self._host.clock.now_ms()

    # -- writing the decorated schedules ---------------------------------------

    def publish(self) -> None:
        """Write the app's decorated schedules, as a worker does when it starts.

        An unchanged schedule keeps its armed tick; a changed one (a new
        decorator after a deploy) replaces the old and arms its next tick.
        """
        store = self._host.broker.schedules
        now_ms = self._now()
        self._up_ms = now_ms
        for schedule in self._decorated:
            try:
                written = store.save(schedule, schedule.next_after(now_ms))
            except BrokerError as exc:
                if not foreign(exc):
                    raise
                # data minitask did not write in the queue's schedules: the worker
                # serves its queues all the same
                logger.error("schedule %s not written: %s", schedule.name, printable(exc))
                continue
            if written:
                logger.info("schedule %s (%s, %s) written", schedule.name, schedule.task,
                            schedule.spec)
        if self._decorated:
            self._host.broker.queues.register_queues(sorted({s.queue for s in self._decorated}))

    # -- the Source protocol ---------------------------------------------------

    def next_job(self) -> Optional[Job]:
        """Fire what is due, then lease work from the queues as ``QueueSource`` does."""
        now_ms = self._host.clock.now_ms()  # (``_now``, asked at every fetch)
        if (now_ms < self._check_at and not self._stale) or self._stop.is_set() \
                or self._holdings.closing:
            job = self._queues.next_job()  # nothing due, or stopping
            if job is not None:  # (``_handed``, at every fetch: without its call)
                self._busy = True
            return job
        job = self._holdings.next_buffered(self._stop.event)
        looked, woken = False, self._stale
        if job is None and woken and not self._due(now_ms):
            # the last wait ended early: most likely for work, so look for it first
            job, looked = self._queues.next_job(), True
        if job is not None:
            self._stale = False  # the wait was ended by work, not by a schedule change
            if not woken or self._due(now_ms):
                try:
                    self._tend(now_ms, fetching=False)  # (a woken worker starts its task first)
                except BaseException:  # (an outage): the job taken goes back, not lost
                    self._stale = woken
                    self._holdings.put_back(job)
                    raise
            return self._handed(job)
        if looked:
            self._tend(now_ms, fetching=False)
            if not self._queued:
                return None  # the queues were looked at already
            return self._handed(self._queues.next_job())  # for the run fired just now
        # a fetch behind fires that replicas must confirm would wait for their WAIT
        # (as a fetch behind acks would, outcomes.py): then the fetch goes on its own
        found = self._tend(now_ms, fetching=not self._host.broker.transport.confirms_writes())
        if found is not None and not found.deliveries and len(self._queues.queues) == 1:
            self._queues.next_event_ms = found.next_event_ms  # looked already: nothing
            return None
        return self._handed(self._queues.next_job())

    def more_due_now(self) -> bool:
        earliest = self.earliest_tick()
        return self._queues.more_due_now() or (
            earliest is not None and earliest <= self._now())

    def wait(self) -> None:
        """Wait as the queues do, also until the earliest armed tick; a wait that ends
        early without work means the schedules may have changed: read them next."""
        earliest = self.earliest_tick()
        planned = self._queues.planned_wait(earliest)
        started = time.monotonic()
        self._queues.wait(until_ms=earliest)
        if (not self._stop.is_set() and planned > _EARLY
                and time.monotonic() - started < planned - _EARLY):
            self._stale = True

    # -- the schedules ---------------------------------------------------------

    def earliest_tick(self) -> Optional[int]:
        ticks = [entry.tick_ms for entry in self._entries.values()
                 if entry.tick_ms is not None and entry.schedule is not None]
        return min(ticks) if ticks else None

    def hands_on(self) -> bool:
        """Whether a task leased behind an outcome may run next with no look at the
        schedules (nothing due, as ``next_job`` first asks); it is then handed out."""
        if self._now() < self._check_at and not self._stale:
            self._busy = True
            return True
        return False

    def _handed(self, job: Optional[Job]) -> Optional[Job]:
        if job is not None:
            self._busy = True
        return job

    def _tend(self, now_ms: int, *, fetching: bool) -> Optional[FetchResult]:
        """Read the schedules if due, then fire every tick due by ``now_ms``.

        ``fetching``: the worker fetches next, with nothing in hand; the fires
        then go in one write with a fetch from the first queue, whose reply is
        held for ``QueueSource.next_job``: a run this worker fired into that
        queue starts after a single round trip, and wakes nobody else.
        """
        with keep_unconfirmed() as unsure:  # Redis made the fires: they stand
            if self._stale or (self._busy and now_ms >= self._refresh_at):
                self._read(now_ms)
            if self._rearm:
                self._repair(now_ms)
            elif now_ms >= self._refresh_at:
                self._refresh_at = now_ms + REFRESH_MS  # idle: nothing to hear of
            found = None
            self._queued = False
            for attempt in range(2):
                due = self._due(now_ms)
                if due:
                    found = self._fire(due, now_ms, fetching)
                    fetching = False
                if not self._stale or attempt:
                    break
                self._read(now_ms)  # a fire found its schedule changed: read, fire again
        if unsure:
            logger.error("Redis wrote but replicas did not confirm it in time: the fires of "
                         "schedule(s) (%s); they stand, and the worker goes on serving its "
                         "queues; a failover may lose them, and their ticks then fire again",
                         unsure[0])
        earliest = self.earliest_tick()
        self._check_at = self._refresh_at if earliest is None else min(earliest,
                                                                       self._refresh_at)
        return found

    def _due(self, now_ms: int) -> List[Tuple[Tuple[str, str], Armed, int]]:
        """The entries whose armed tick is due by ``now_ms``, the earliest first."""
        due = [(key, entry, entry.tick_ms) for key, entry in self._entries.items()
               if entry.schedule is not None and entry.tick_ms is not None
               and entry.tick_ms <= now_ms]
        return sorted(due, key=lambda item: item[2])

    def _read(self, now_ms: int) -> None:
        own: Dict[str, List[str]] = {}
        for schedule in self._decorated:
            own.setdefault(schedule.queue, []).append(schedule.name)
        # a record of this app's largest message and its timing is read, no longer one
        longest = max(MAX_RECORD_BYTES, self._host.max_message_bytes + 65_536)
        refused: Dict[str, Tuple[str, str]] = {}  # queue -> its key of another type, why
        found = self._host.broker.schedules.armed(self._queues.queues, own, longest, refused)
        if self._up_ms is None:
            self._up_ms = now_ms
        self._rearm, self._entries = [], {}
        #: queue -> its unreadable records: how many, and the first few (for the line
        #: that says so: 100,000 planted records cost no memory once read)
        unreadable: Dict[str, Tuple[int, List[Armed]]] = {}
        mended = (any([self._restore(queue, *said, now_ms) for queue, said in refused.items()])
                  | write_back(self._host, self._decorated, found, now_ms))  # (both called)
        for queue, entries in found.items():
            for entry in entries:
                if entry.schedule is None and self._mend(queue, entry, now_ms):
                    mended = True
                    continue
                if entry.schedule is None:
                    count, shown = unreadable.get(queue, (0, []))
                    if count < UNREADABLE_SHOWN:
                        shown.append(entry)
                    unreadable[queue] = (count + 1, shown)
                    continue
                latest = _tick_after_next(entry.schedule, now_ms + SKEW_MS)
                if entry.tick_ms is not None and latest is not None and entry.tick_ms > latest:
                    # later than any tick minitask arms from a clock near Redis's (1e13 on
                    # an every=60 schedule, or an hour ahead): it would silence the schedule
                    entry = Armed(entry.name, entry.record, entry.schedule, None,
                                  float(entry.tick_ms))
                self._entries[(queue, entry.name)] = entry
                if entry.bad_tick is not None:
                    self._rearm.append(((queue, entry.name), entry))
        for queue in self._queues.queues:
            self._say_unreadable(queue, *unreadable.get(queue, (0, [])))
        self._doubled = _say_doubled(self._entries, self._doubled)
        self._stale = mended  # a record written again: read at once, then fired
        self._busy = False
        self._refresh_at = now_ms + REFRESH_MS

    def _mend(self, queue: str, entry: Armed, now_ms: int) -> bool:
        """Write again the record of one of this app's own schedules (its code is the
        truth for them) that this worker cannot read (a planted 50 MB one, or one
        damaged), armed at its next tick, as a worker writes it when it starts; said
        once. Never one a newer minitask wrote (a rolling deploy: its workers own the
        definition now). True when the app's record is there now, written here or by
        another worker mending it since this read (then said by that one, not here as
        unreadable): read again, it fires again from then, with no restart (the record
        is this code's own, so that read finds it readable: no loop)."""
        own = next((schedule for schedule in self._decorated
                    if schedule.queue == queue and schedule.name == entry.name), None)
        if own is None or _newer(entry.record):
            return False
        following = own.next_after(now_ms)
        try:
            written = self._host.broker.schedules.save(own, following)
        except BrokerError as exc:
            if not foreign(exc):
                raise
            return False  # data minitask did not write in its keys: said by the read
        if written:
            logger.warning("schedule %s: its record in queue %r could not be read (%s); "
                           "written again from the app's code, next run at %s",
                           printable(entry.name), printable(queue),
                           cut_text(printable(entry.problem or "unknown"), 200),
                           _stamp(following))
        # not written: the same record was there already (another worker's mend)
        return True

    def _restore(self, queue: str, key: str, problem: str, now_ms: int) -> bool:
        """Save again the app's schedules of ``queue`` (its ``key`` holds another type: the
        first save moves it aside, each is armed at its next tick); True when one was."""
        restored = False
        for schedule in (own for own in self._decorated if own.queue == queue):
            try:
                self._host.broker.schedules.save(schedule, schedule.next_after(now_ms))
            except BrokerError as exc:
                if not foreign(exc):
                    raise
                break
            restored = True
        if not restored:
            ignored(key, problem)
        return restored

    def _say_unreadable(self, queue: str, count: int, shown: List[Armed]) -> None:
        """One line for the armed records of ``queue`` this worker cannot read: their
        count and the first few, said again when that changes, at most once a
        ``UNREADABLE_SAY_S`` (a queue with 100,000 planted records says one line, not
        100,000, and keeps no entry for each)."""
        names = tuple(entry.name for entry in shown)
        if self._said.get(queue) == (count, names) or not self._unreadable.note(queue):
            return
        self._said[queue] = (count, names)
        if not count:  # none to say starts no wait: the first that come are said at once
            self._unreadable.forget(queue)
            return
        first = shown[0]
        others = "".join(f", {printable(name)!r}" for name in names[1:])
        more = f" and {count - len(names):,} more" if count > len(names) else ""
        logger.warning("%s armed schedule record(s) of queue %r cannot be read by this worker "
                       "(no record this version writes: a newer minitask's, or data minitask "
                       "did not write; they are not fired from here): %r (%s)%s%s",
                       f"{count:,}", printable(queue), printable(first.name),
                       cut_text(printable(first.problem or "unknown"), 500), others, more)

    def _repair(self, now_ms: int) -> None:
        """Re-arm the schedules whose armed tick is no tick minitask wrote (inf,
        1e300, 1.5, years ahead) at their next tick from now, running nothing."""
        store = self._host.broker.schedules
        rearm, self._rearm = self._rearm, []
        for key, entry in rearm:
            schedule = entry.schedule
            assert schedule is not None and entry.bad_tick is not None
            following = schedule.next_after(now_ms)
            fired = store.fire(entry, entry.bad_tick, following, None, now_ms)
            ignored(self._host.broker.schedules.keys(key[0]).ticks,
                    f"the tick {entry.bad_tick!r} of schedule {entry.name!r} is no time "
                    f"minitask arms; re-armed at {_stamp(following)}")
            self._outcome(key, entry, 0, None, fired)

    def _fire(self, due: List[Tuple[Tuple[str, str], Armed, int]], now_ms: int,
              fetching: bool) -> Optional[FetchResult]:
        """Fire the due ticks in one write (with a fetch behind when ``fetching``, whose
        result is held and returned)."""
        store = self._host.broker.schedules
        first_queue = self._queues.queues[0]
        fetching = fetching and self._queues.fetches_behind()  # not from a queue set aside
        calls: List[ScriptCall] = []
        plans: List[Tuple[Tuple[str, str], Armed, int, Optional[int], bool]] = []
        for key, entry, armed_ms in due:
            schedule = entry.schedule
            assert schedule is not None
            run_ms, following_ms = schedule.plan(armed_ms, now_ms)
            run: Optional[Run] = None
            if run_ms is not None:
                message = schedule.run_message(run_ms, now_ms)
                run = (run_ms, message.id, encode_message(message), schedule.priority)
            quiet = fetching and key[0] == first_queue  # the fetch behind takes its run
            calls.append(store.fire_call(entry, armed_ms, following_ms, run, now_ms,
                                         wake=not quiet))
            plans.append((key, entry, armed_ms, run_ms, quiet))
        if fetching:
            calls.append(self._queues.fetch_call(now_ms))
        names = ", ".join(entry.name for _, entry, _ in due[:3])
        # a fetch behind refused (its queue's data) sets its queue aside, the fires stand
        sent = time.monotonic()
        try:
            replies = self._host.broker.transport.run_calls(
                calls, f"fire schedule(s) {names}", keep_refused=fetching)
        except BrokerError as exc:
            exc.worker_step = "fire schedules"  # its log says so, not "fetch tasks"
            raise
        found = self._queues.fetched_behind(replies[-1], sent) if fetching else None
        if found is not None:
            self._queues.take_fetched(found, first_queue)
        for reply in replies[:len(plans)]:
            if isinstance(reply, BrokerError):
                reply.worker_step = "fire schedules"
                raise reply  # a fire refused: as ever, the caller's error
        unwoken = False  # a run was queued without a wake token, for the fetch behind
        for (key, entry, armed_ms, run_ms, quiet), reply in zip(plans, replies):
            fired = store.fired(reply)
            unwoken = unwoken or (quiet and fired.status == "fired")
            self._queued = self._queued or fired.status == "fired"
            self._outcome(key, entry, armed_ms, run_ms, fired)
        if found is not None and unwoken and not found.deliveries:
            # The fetch behind did not get the run (it ran first because the fire's
            # script had to be loaded, or it leased a due task instead): fetch again.
            return None
        return found

    def _outcome(self, key: Tuple[str, str], entry: Armed, armed_ms: int,
                 run_ms: Optional[int], fired: Fired) -> None:
        """Keep what a fire did: the new armed tick, or a read of the schedules."""
        k = self._host.broker.schedules.keys(key[0])
        if fired.status in ("changed", "foreign"):
            # foreign: nothing was changed; fired again after the next read, if fixed (said
            # of the key that holds it, or, schedules or ticks, read at once: ``_restore``)
            if fired.status == "changed" or fired.key in (k.schedules, k.ticks):
                self._stale = True
            else:
                ignored(fired.key or k.schedules, fired.problem)
            self._entries.pop(key, None)
            return
        self._entries[key] = Armed(entry.name, entry.record, entry.schedule, fired.armed_ms)
        name = entry.name
        if fired.aside:
            ignored(k.fired, f"it held another type than the hash minitask keeps there: "
                             f"moved aside to {fired.aside} (kept)")
        if fired.status == "fired" and run_ms != armed_ms:
            logger.info("schedule %s: ticks from %s missed (%s); ran the latest, %s", name,
                        _stamp(armed_ms), self._why_missed(armed_ms), _stamp(run_ms))
        elif fired.status == "fired":
            logger.debug("schedule %s: fired tick %s", name, _stamp(armed_ms))
        elif fired.status == "skipped":
            logger.info("schedule %s: ticks from %s missed (%s); catch_up='skip' runs none",
                        name, _stamp(armed_ms), self._why_missed(armed_ms))
        elif fired.status == "overlap":
            logger.info("schedule %s: tick %s skipped: the last run has not finished "
                        "(overlap=False)", name, _stamp(run_ms))

    def _why_missed(self, armed_ms: int) -> str:
        """Why ticks from ``armed_ms`` were missed, as far as this worker knows: it was
        up then, so it looked late (a task held its event loop, or every slot was busy,
        and no other worker of the queue fired them); or no worker was up."""
        if self._up_ms is not None and armed_ms >= self._up_ms:
            late = (self._now() - armed_ms) / 1000
            return (f"this worker was up, but looked {late:.1f} s late: a task blocked its "
                    f"event loop, or all its slots were busy")
        return "no worker was up"


def _say_doubled(entries: Dict[Tuple[str, str], Armed],
                 said: Set[Tuple[str, Tuple[str, ...]]]) -> Set[Tuple[str, Tuple[str, ...]]]:
    """One WARNING for the schedule names several of the worker's queues hold (``entries``)
    and not ``said``, the first few named: each queue fires it, so it runs once in each at
    every tick. ``add_schedule`` moving a schedule saves it in its new queue, then removes
    it from the old: a producer killed in between leaves it in both, until an add_schedule
    or remove_schedule of the name repairs it. Returns those held now."""
    queues: Dict[str, List[str]] = {}
    for queue, name in entries:
        queues.setdefault(name, []).append(queue)
    doubled = {(name, tuple(sorted(held))) for name, held in queues.items()
               if len(held) > 1}
    new = sorted(doubled - said)
    if not new:
        return doubled
    shown = "; ".join(f"{printable(name)!r} in queues "
                      f"{', '.join(repr(printable(q)) for q in held)}"
                      for name, held in new[:UNREADABLE_SHOWN])
    more = f" (and {len(new) - UNREADABLE_SHOWN:,} more)" if len(new) > UNREADABLE_SHOWN else ""
    logger.warning("a schedule held by several queues runs once in each at every tick (an "
                   "add_schedule moving it was stopped between its save and its "
                   "removal?): %s%s; add_schedule it again with the queue meant, or "
                   "remove_schedule it, to keep one", shown, more)
    return doubled


def _newer(record: bytes) -> bool:
    """Whether a newer minitask wrote ``record`` (periodic.NewerRecord)."""
    try:
        from_record(record)
    except NewerRecord:
        return True
    except DecodeError:
        pass
    return False


def _stamp(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _tick_after_next(schedule: Schedule, ms: int) -> Optional[int]:
    """The second tick after ``ms`` (or the first, when there is no second): no clock
    within ``SKEW_MS`` of this one arms a tick later than that."""
    first = schedule.next_after(ms)
    following = None if first is None else schedule.next_after(first)
    return following if following is not None else first
