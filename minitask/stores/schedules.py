"""ScheduleStore: periodic schedules in Redis, and the atomic firing of their ticks.

Each queue keeps its schedules under its own hash tag (Redis Cluster): the
records, the armed tick of each (a ZSET, so the earliest is one read away)
and the tick and id of each schedule's last run. Firing a tick is one script
that checks the tick is still armed, arms the next one and enqueues the run,
so that any number of workers may race for it and exactly one wins. Listings
read them a page at a time (``page``), never all at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..broker.packing import ScriptCall
from ..broker.transport import text
from ..errors import DecodeError
from ..periodic import MAX_NAME_BYTES, Schedule, from_record, with_times
from ..printable import printable
from ..wire.message import unprintable
from .bounds import TooLarge, read_fields, too_large
from .foreign import ignored, raise_refusals, summarised, text_of, whole
from .queue import BATCH_LIMIT, WAKE_CAP
from .store import Store

_SCRIPTS = ("schedule_save", "schedule_remove")

#: The ticks of a queue a worker's read of its schedules takes from the earliest, and
#: as many again from where the last read's scan stopped (schedule_armed.lua).
ARMED_BATCH = 1000
#: The longest schedule record a worker reads: a run's message of the default
#: ``max_message_bytes`` and its timing, with room to spare (an app allowing larger
#: messages passes its own bound).
MAX_RECORD_BYTES = 1_048_576 + 65_536
#: The schedules removed by remove_schedule a queue keeps marked (``schedules_removed``,
#: the newest): running workers do not write those back. Bounded, so that schedules
#: added and removed at run time under ever new names leave no growing trace.
REMOVED_MOST = 1_000

#: A run to enqueue: (tick in ms, task id, encoded message, priority).
Run = Tuple[int, str, bytes, int]

#: A schedule record that cannot be listed: (key, field or "", the problem).
Unreadable = Tuple[str, str, str]


@dataclass(frozen=True)
class Armed:
    """One schedule of a queue as a worker fires it: its record, and its armed tick."""

    name: str
    record: bytes
    schedule: Optional[Schedule]   # None: a record this minitask cannot read
    tick_ms: Optional[int]         # None: no tick armed (the schedule has no more)
    #: the armed score when it is no tick minitask wrote (inf, 1e300, 1.5): to re-arm
    bad_tick: Optional[float] = None
    #: why ``schedule`` is None (the record's DecodeError)
    problem: str = ""


@dataclass(frozen=True)
class Fired:
    """What a fire call did: its status (see schedule_fire.lua) and the armed tick."""

    status: str
    armed_ms: Optional[int]
    #: status 'foreign': what the key ``key`` holds that minitask did not write (nothing
    #: was changed)
    problem: str = ""
    key: str = ""
    #: where a fired hash of another type was moved aside to ("" when none was)
    aside: str = ""


@dataclass(frozen=True)
class Place:
    """Where a page of a queue's schedules starts (``ScheduleStore.page``)."""

    #: "armed": among the schedules with a tick, after the entry at tick ``at`` (a
    #: score, as Redis writes it; "" from the first) named ``name``; "unarmed": among
    #: those with none, from the first when ``at`` is "0", by name after ``name`` when
    #: it is "n", else at HSCAN cursor ``at`` (schedule_names could not be used; only
    #: the names after ``name``, when one, as a page by name fell back to the scan)
    phase: str = "armed"
    at: str = ""
    name: bytes = b""


@dataclass(frozen=True)
class Page:
    """One page of a queue's schedules."""

    schedules: List[Schedule]
    unreadable: List[Unreadable]
    fields: int               # records read: the schedules and unreadable ones
    next: Optional[Place]     # None: the queue has no more
    #: ticks passed over that name no schedule record (removed), and of them those
    #: Redis refused to remove (a replica): still there, passed over again next time
    dangling: int = 0
    dangling_kept: int = 0


class ScheduleStore(Store):
    """The schedules of one app's queues."""

    scripts = (*_SCRIPTS, "schedule_fire", "schedule_page", "schedule_armed", "hash_fields")

    # -- changing ----------------------------------------------------------------

    def save(self, schedule: Schedule, first_tick_ms: Optional[int], *,
             missing: bool = False) -> bool:
        """Write a schedule into its queue and arm ``first_tick_ms``; an unchanged one
        is left as it is (its armed tick too). True when written.

        ``missing``: write it only when its record is gone and ``remove`` did not remove
        it since its last save (a running worker writing back its decorated schedules
        when Redis lost them); a save without clears that mark.

        Idle workers of the queue are woken so that they read the schedules again.
        A schedules or ticks key of another type (it holds none of minitask's schedules,
        and stopped every one of the queue) is moved aside whole first, said once.
        """
        k = self.keys(schedule.queue)
        written, *moved = self.transport.run(
            "schedule_save", (k.schedules, k.ticks, k.wake, k.schedule_names,
                              k.schedules_removed),
            (schedule.name, schedule.record(), -1 if first_tick_ms is None else first_tick_ms,
             WAKE_CAP, int(missing)), f"save schedule {schedule.name!r}")
        for key, kind, to in zip((k.schedules, k.ticks), ("hash", "sorted set"), moved):
            if text(to):
                ignored(key, f"it held another type than the {kind} minitask keeps there: "
                             f"moved aside to {text(to)} (kept); schedule {schedule.name!r} "
                             f"written again and armed")
        return bool(written)

    def remove(self, queue: str, name: str, now_ms: int, decorated: bool = False) -> bool:
        """Delete a schedule from ``queue``; False when it was not there. Its name is
        marked removed at ``now_ms`` (when the queue held it, or the caller's code
        decorates it there: ``decorated``), among the newest REMOVED_MOST marks of the
        queue (schedule_remove.lua): running workers do not write it back."""
        k = self.keys(queue)
        return bool(self.transport.run(
            "schedule_remove", (k.schedules, k.ticks, k.fired, k.schedule_names,
                                k.schedules_removed),
            (name, now_ms, REMOVED_MOST, int(decorated)), f"remove schedule {name!r}"))

    # -- reading -----------------------------------------------------------------

    #: (queue, name) -> the readable armed schedules last read (``armed``), whose
    #: records are not decoded again while they do not change (none is kept for an
    #: unreadable record: planted ones cost no memory)
    _known: Mapping[Tuple[str, str], Armed] = {}

    #: queue -> the rank its next read scans the ticks from (see schedule_armed.lua)
    _scan: Mapping[str, int] = {}

    def armed(self, queues: Sequence[str], named: Mapping[str, Sequence[str]] = {},
              longest: int = MAX_RECORD_BYTES,
              refused: Optional[Dict[str, Tuple[str, str]]] = None) -> Dict[str, List[Armed]]:
        """The armed schedules of ``queues`` (a record and a tick each) a worker needs,
        in one round trip whose cost is bounded whatever the queues hold
        (schedule_armed.lua): the earliest ``ARMED_BATCH`` ticks of each, as many more
        scanned on from the last read (a schedule behind many earlier ticks is found
        in time), the schedules read before and those ``named`` (the worker's own).
        A record longer than ``longest`` is not read (none minitask writes is): it is
        handed out as unreadable, with its length.

        Read tolerantly (``stores/foreign.py``): a key of another type counts as
        empty, a name that is not UTF-8 is left out, and a tick that is no whole
        number of ms up to year 9999 (inf, 1e300, 1.5) is handed out as ``bad_tick``
        for the worker to re-arm; what is ignored is said in one line per key. Given
        ``refused``, a schedules or ticks key of another type is not said but put
        there (queue -> (key, problem)), for a worker to move aside as it writes its
        own schedules again (``save``).
        A record read before and unchanged is not decoded again.
        """
        calls = []
        for queue in queues:
            names = sorted({*named.get(queue, ()),
                            *(name for (known, name) in self._known if known == queue)})
            calls.append(("schedule_armed", queue,
                          (self.keys(queue).schedules, self.keys(queue).ticks),
                          (ARMED_BATCH, longest, self._scan.get(queue, 0), *names), 0))
        replies = self.transport.run_calls(calls, "read the schedules") if calls else []
        found: Dict[str, List[Armed]] = {}
        scan = dict(self._scan)
        with summarised():
            for queue, reply in zip(queues, replies):
                found[queue] = self._armed_of(queue, reply, self._known, longest, refused)
                scan[queue] = int(reply[3])
        self._scan = scan
        kept = {key: entry for key, entry in self._known.items() if key[0] not in found}
        kept.update(((queue, entry.name), entry) for queue, entries in found.items()
                    for entry in entries if entry.schedule is not None)
        self._known = kept
        return found

    def _armed_of(self, queue: str, reply: Any, known: Mapping[Tuple[str, str], Armed],
                  longest: int, refused: Optional[Dict[str, Tuple[str, str]]]) -> List[Armed]:
        k = self.keys(queue)
        refused_records, refused_ticks, dangling, _, *joined = reply
        for key, error, kind in ((k.schedules, refused_records, "a hash"),
                                 (k.ticks, refused_ticks, "a sorted set")):
            if error:
                problem = f"it holds another type than {kind} ({text_of(error)})"
                if refused is None:
                    ignored(key, problem)
                else:
                    refused[queue] = (key, problem)
                return []
        counts, *removed = str(text(dangling)).split()
        gone, _, kept = counts.partition(",")
        if int(gone):
            ignored(k.ticks, f"{int(gone):,} tick(s) naming no schedule record "
                             f"were removed (never fired)")
        if int(kept or 0):
            ignored(k.ticks, f"{int(kept):,} tick(s) naming no schedule record could not "
                             f"be removed (Redis refused the write); never fired, and "
                             f"tried again at the next look")
        for length in removed:  # schedule_armed.lua removed them, read once
            ignored(k.ticks, f"a tick whose name is {int(length):,} bytes, longer than any "
                             f"schedule's ({MAX_NAME_BYTES}), was removed")
        entries = []
        for index in range(0, len(joined), 3):
            raw, record, score = joined[index:index + 3]
            name = _name(k.schedules, raw)
            if name is None:
                continue
            tick_ms = whole(score)
            before = known.get((queue, name))
            if isinstance(record, int):  # too long to be a record minitask writes
                entries.append(Armed(name, b"", None, tick_ms, None, (
                    f"a record of {record:,} bytes, longer than any this minitask writes "
                    f"({longest:,}): not read")))
                continue
            if before is not None and before.record == record:
                schedule, problem = before.schedule, before.problem
            else:
                try:
                    schedule, problem = _read(record, name, queue), ""
                except DecodeError as exc:
                    schedule, problem = None, str(exc)
            entries.append(Armed(name, record, schedule, tick_ms,
                                 None if tick_ms is not None else float(score), problem))
        entries.sort(key=lambda entry: entry.name)
        return entries

    def counts(self, queues: Sequence[str]) -> Dict[str, int]:
        """How many records the schedules of each queue hold (HLEN, one round trip);
        -1 for a key of another type, which a page reports as unreadable."""
        with self.transport.errors("count the schedules"):
            pipe = self.transport.client.pipeline(transaction=False)
            for queue in queues:
                pipe.hlen(self.keys(queue).schedules)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        return {queue: -1 if isinstance(reply, Exception) else int(reply)
                for queue, reply in zip(queues, replies)}

    def one(self, queue: str, name: str) -> Optional[Schedule]:
        """The schedule ``name`` of ``queue`` with its next and last tick times (read as
        ``page`` reads them); None when it is not there or cannot be read."""
        k = self.keys(queue)
        what = f"read schedule {name!r} of queue {queue!r}"
        # measured first: a record or a time longer than minitask writes is not read
        record, last = read_fields(self.transport, [(k.schedules, name, self.longest_record()),
                                                    (k.fired, f"at:{name}", 64)], what)
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(k.ticks, name)
            tick = pipe.execute(raise_on_error=False)[0]
        if isinstance(record, TooLarge):
            too_large(k.schedules, name, record.length)
        if not isinstance(record, bytes):
            return None
        schedule = _readable(record, name, queue)
        return None if schedule is None else with_times(
            schedule, None if isinstance(tick, Exception) else whole(tick),
            whole(last) if isinstance(last, bytes) else None)

    def longest_record(self) -> int:
        """The longest schedule record read: a run's message of the app's
        ``max_message_bytes`` and its timing (``MAX_RECORD_BYTES`` at least)."""
        return max(MAX_RECORD_BYTES, self.bounds.message + 65_536)

    def page(self, queue: str, place: Place, count: int) -> Page:
        """At most about ``count`` schedules of ``queue`` from ``place`` on, and where
        the next page starts: those with a tick soonest first, then those with none
        (schedule_page.lua: one script call, bounded by ``count`` whatever the number
        of schedules). Records that cannot be listed (a field that is no schedule
        name, a record this minitask cannot read, a key of another type) are in the
        page's ``unreadable``; a tick or time that is no time is shown as none."""
        k = self.keys(queue)
        reply = self.transport.run(
            "schedule_page", (k.schedules, k.ticks, k.fired, k.schedule_names),
            (place.phase, count, place.at, place.name, self.longest_record()),
            f"list the schedules of queue {queue!r}")
        status, following, *rest = reply
        if text(status) == "foreign":
            problem = f"it holds another type than a hash ({text_of(following)})"
            ignored(k.schedules, problem)
            return Page([], [(k.schedules, "", problem)], 0, None)
        removed, *entries = rest
        _removed(k, removed)
        found: List[Schedule] = []
        unreadable: List[Unreadable] = []
        fields = 0
        for index in range(0, len(entries), 4):
            raw, tick, record, last = entries[index:index + 4]
            if record is None:  # a tick without a record: never listed (nor fired)
                continue
            fields += 1
            name = _name(k.schedules, raw, unreadable)
            if name is None:
                continue
            if isinstance(record, int):  # its length: longer than minitask writes, not read
                unreadable.append((k.schedules, name, too_large(k.schedules, name, record)))
                continue
            try:
                schedule = _read(record, name, queue)
            except DecodeError as exc:
                unreadable.append((k.schedules, name, str(exc)))
                continue
            found.append(with_times(schedule, whole(tick), whole(last)))
        nxt: Optional[Place]
        dangling = kept = 0
        if place.phase == "armed":
            # more or not, and the last tick read's place, removed or not
            more, at, last, dangling, kept = following
            dangling, kept = int(dangling), int(kept)
            nxt = (Place("armed", text(at), last) if text(more) == "1" else
                   Place("unarmed", "0"))
        elif isinstance(following, list):  # by name: after the last one read
            nxt = Place("unarmed", "n", following[1])
        else:  # an HSCAN cursor (the names could not be used), after the same name
            cursor = text(following)
            nxt = None if cursor == "0" else Place("unarmed", cursor, place.name)
        return Page(found, unreadable, fields, nxt, dangling, kept)

    def said_dangling(self, queue: str, passed: int, kept: int) -> None:
        """Say, in one line for a listing's page, the ticks of ``queue`` naming no
        schedule record its reads passed over (``Page.dangling``), and of them those
        Redis refused to remove."""
        if passed:
            ignored(self.keys(queue).ticks, (
                f"{passed:,} tick(s) naming no schedule record were passed over and " + (
                    f"{passed - kept:,} removed ({kept:,} left: Redis refused their removal)"
                    if kept else "removed")))

    # -- firing ------------------------------------------------------------------

    def fire(self, entry: Armed, armed_ms: Union[int, float], following_ms: Optional[int],
             run: Optional[Run], now_ms: int) -> Fired:
        """Fire the armed tick ``armed_ms`` of ``entry``: arm ``following_ms`` and
        enqueue ``run`` (None: run nothing), unless another worker fired it first
        or the schedule changed meanwhile."""
        call = self.fire_call(entry, armed_ms, following_ms, run, now_ms)
        return self.fired(self.transport.run_calls([call], f"fire schedule {entry.name!r}")[0])

    def fire_call(self, entry: Armed, armed_ms: Union[int, float], following_ms: Optional[int],
                  run: Optional[Run], now_ms: int, *, wake: bool = True) -> ScriptCall:
        """A fire (see ``fire``), to send alone or with other calls; ``wake`` False
        when a fetch from the run's queue follows in the same write."""
        schedule = entry.schedule
        assert schedule is not None
        k = self.keys(schedule.queue)
        tick_ms, task_id, body, priority = run if run is not None else (-1, "-", b"", 0)
        return ("schedule_fire", schedule.queue,
                (k.schedules, k.ticks, k.fired, k.messages, k.dead, k.delayed, k.order, k.wake,
                 *k.ready),
                (k.result(task_id), entry.name, entry.record, armed_ms,
                 -1 if following_ms is None else following_ms, tick_ms, task_id, body,
                 priority, now_ms, 1 if schedule.overlap else 0, WAKE_CAP, BATCH_LIMIT,
                 1 if wake else 0), 1)

    @staticmethod
    def fired(reply: Any) -> Fired:
        """A fire script's reply, read."""
        status, armed, *problem = reply
        armed_ms = int(armed)
        return Fired(text(status), armed_ms if armed_ms >= 0 else None,
                     text_of(problem[0]) or "" if problem else "",
                     text_of(problem[1]) or "" if len(problem) > 1 else "",
                     text_of(problem[2]) or "" if len(problem) > 2 else "")


def _removed(k: Any, removed: Any) -> None:
    """Say what schedule_page.lua took out of queue keys ``k`` (each once: it is gone,
    never read again)."""
    for kind, length in removed or ():
        kind = text(kind)
        if kind == "aside":  # length: the key it was moved to
            ignored(k.schedule_names, f"it held another type than the sorted set minitask "
                                      f"keeps there: moved aside to {text(length)} (kept), "
                                      f"the names made again from the records")
            continue
        size = f"{int(length):,}"
        if kind == "score":
            ignored(k.schedule_names, f"{size} name(s) of another score than 0 (none "
                                      f"minitask writes: the names are paged by name) "
                                      f"were removed")
        elif kind == "order":
            ignored(k.schedule_names, "its names came out of order (not paged by name): "
                                      "the listing of the schedules with no tick ended there")
        elif kind == "index":
            ignored(k.schedule_names, f"a name of {size} bytes, longer than any schedule's "
                                      f"({MAX_NAME_BYTES}), was removed")
        elif kind == "tick":
            ignored(k.ticks, f"a tick whose name is {size} bytes, longer than any "
                             f"schedule's ({MAX_NAME_BYTES}), was removed")
        else:
            ignored(k.schedules, f"a field of {size} bytes, longer than any schedule's name "
                                 f"({MAX_NAME_BYTES}), was removed with its record (not listed)")


def _name(key: str, field: bytes,
          unreadable: Optional[List[Unreadable]] = None) -> Optional[str]:
    """A field of the schedules hash as a schedule name; None (warned about once, and
    added to ``unreadable`` if given) when it is not UTF-8 or holds a control
    character."""
    name = text_of(field)
    if name is None:
        shown, problem = printable(field), "is not UTF-8"
    elif not name or unprintable(name) is not None:
        # no schedule minitask writes has such a name, and a run's task id made of
        # it would be dead-lettered at every tick
        shown, problem = printable(name), "is no schedule name"
    else:
        return name
    ignored(key, f"field '{shown}' {problem}")
    if unreadable is not None:
        unreadable.append((key, shown, problem))
    return None


def _readable(record: bytes, name: str, queue: str) -> Optional[Schedule]:
    """The schedule of a record (``_read``); None for one this minitask cannot read
    (written by a newer version, or damaged): it is never fired, and listed as
    unreadable."""
    try:
        return _read(record, name, queue)
    except DecodeError:
        return None


def _read(record: bytes, name: str, queue: str) -> Schedule:
    """The schedule of a record held in ``queue``'s schedules, under ``name``, the
    field it is stored, armed and fired under (a record whose own name differs was
    not written there by minitask; errors name the field).

    Raises:
        DecodeError: a record this minitask cannot read, saying why; or one whose run
            goes to another queue than the one holding it (minitask keeps a schedule
            in its run's queue, where its fires look for it: fired from here, each
            fire would find it changed).
    """
    schedule = from_record(record, name)
    if schedule.queue != queue:
        raise DecodeError(f"cannot decode a schedule record: its runs go to queue "
                          f"{printable(schedule.queue)!r}, not {printable(queue)!r} whose "
                          f"schedules hold it (minitask keeps a schedule in its run's queue)")
    return schedule
