"""Testing your tasks: an app on a private in-memory broker, drained in-process.

::

    from minitask.testing import drain, isolated

    def test_receipt_is_retried_then_sent():
        with isolated(app):
            handle = send_receipt.delay(1001, "ann@example.com")
            drain(app, advance=5)      # runs it, and its retry due within 5 s
            assert handle.get(timeout=1).startswith("emailed")

``isolated`` gives the app a fresh fakeredis server (with Lua, so the very
scripts a real Redis runs) and a clock that moves only when ``drain`` moves
it, so delays, retries and backoffs are tested without waiting for them.
Needs ``pip install "minitask[testing]"``.
"""
from __future__ import annotations

import reprlib
import warnings
from collections import Counter
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

from .app import Minitask
from .broker.durability import Durability
from .errors import ConfigurationError
from .printable import own_logger
from .stores.schedules import Armed
from .wire.message import MAX_SECONDS, to_ms, wall_ms

logger = own_logger(__name__)

#: ``drain`` gives up after running this many attempts (unless given another
#: ``limit``): a task that keeps enqueueing work due at once would otherwise never
#: let it return. An attempt costs some 20 ms on the in-memory server (its Lua is
#: interpreted): 1,000 is 20 s or so, where the 100,000 it was took over an hour.
DRAIN_LIMIT = 1_000
#: ``drain`` refuses, before it runs anything, a window in which the app's schedules
#: would fire more ticks than this: each runs, as with a worker up all along, and
#: 86,400 runs of an every-second schedule over a day would take the test many minutes.
DRAIN_TICKS = 1_000
#: The subscriber ``drain`` runs broadcast calls as: ``isolated`` subscribes it to
#: every broadcast queue of the app, so each broadcast call runs once, in-process.
SUBSCRIBER = "testing"


class TestClock:
    """Time as an isolated app sees it: starts at the real time, then moves only
    when ``drain(advance=...)`` (or a test, with ``advance``) moves it."""

    __test__ = False  # not a test class, whatever pytest's name rules say

    def __init__(self, now_ms: Optional[int] = None) -> None:
        self.ms = wall_ms() if now_ms is None else now_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        """Move time forward; moving it back is refused (leases and due times would lie).

        Raises:
            ConfigurationError: ``seconds`` is no finite number from 0 to 100 years.
        """
        self.ms += to_ms(_seconds(seconds, "TestClock.advance(seconds)"))


def _seconds(value: object, what: str) -> float:
    """A span of time to move forward: a finite number of seconds, 0 or more (100
    years at most: a later time is past what Redis and the scripts store).

    Raises:
        ConfigurationError: anything else (nan, inf, negative, a str, a bool), naming
            ``what`` it was given to.
    """
    # (compared, never converted: nan fails both bounds, an int of any size is compared)
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not 0 <= value <= MAX_SECONDS):
        shown = (f"an int of {value.bit_length()} bits" if isinstance(value, int)
                 and not isinstance(value, bool) and value.bit_length() > 64
                 else reprlib.repr(value))
        raise ConfigurationError(f"{what} takes a finite number of seconds, 0 or more (at "
                                 f"most {MAX_SECONDS:,}: 100 years), got {shown}")
    return float(value)


def _fake_client() -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import fakeredis
    except ImportError as exc:
        raise ConfigurationError('minitask.testing needs fakeredis with Lua: pip install '
                                 '"minitask[testing]"') from exc
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def _on_clock(client: Any, clock: "TestClock") -> None:
    """Make the fake server's TIME read ``clock``: the scripts that count on the
    server's time (a rate limit's starts, in fetch.lua) then count on the time the
    test moves, as the app does. Without it a 1/s backlog never ran under ``drain``:
    the fetch took the server's (real) time over a caller's clock within 10 s of it,
    and drain's clock, moved to the limiter's next turn, was never the flow's."""
    pool = client.connection_pool
    made = pool.connection_class

    class OnClock(made):  # type: ignore[misc,valid-type]
        def _connect(self) -> Any:
            sock = super()._connect()
            # (a fake server looks a command up on its socket by name, TIME as "time")
            sock.time = lambda: _time_reply(clock.now_ms())
            return sock

    pool.connection_class = OnClock


def _time_reply(ms: int) -> List[bytes]:
    """TIME's reply at ``ms``: seconds and microseconds, as text."""
    return [str(ms // 1000).encode(), str(ms % 1000 * 1000).encode()]


@contextmanager
def isolated(app: Minitask) -> Iterator[Minitask]:
    """Point ``app`` at a private in-memory broker for the duration of the block.

    Every task of the app (and every handle) uses a fresh fakeredis server with
    Lua and a ``TestClock``; on exit the app's own broker and clock come back,
    and nothing was written to them. Blocks may nest.

    Yields:
        The app itself.

    Raises:
        ConfigurationError: fakeredis (with Lua) is not installed.
    """
    client = _fake_client()
    clock = TestClock()
    _on_clock(client, clock)
    # The app is the user's own object: swap what it reaches Redis and time through,
    # and put it all back, so that code under test needs no change at all.
    # An in-memory server has no replicas: the app's durability is set aside too.
    saved = (app._broker_setting, app._broker, app.clock, app._sender.clock, app.durability,
             app._sender.durability)
    # a test may remove a decorated schedule (to keep its ticks out of a drain): put back
    decorated = dict(app.periodic_schedules)
    app._broker_setting, app._broker = client, None  # type: ignore[assignment]
    app.clock = app._sender.clock = clock
    app.durability = app._sender.durability = Durability()
    try:
        _subscribe(app)
        yield app
    finally:
        try:
            app.close()
        finally:
            (app._broker_setting, app._broker, app.clock, app._sender.clock, app.durability,
             app._sender.durability) = saved
            for name, schedule in decorated.items():
                app.periodic_schedules.setdefault(name, schedule)


def drain(app: Minitask, *, advance: float = 0.0, limit: Optional[int] = None) -> int:
    """Run, in this thread, every task that is ready or falls due within ``advance``
    seconds, including what those tasks enqueue and their retries; returns how
    many attempts ran (a retried task counts each attempt).

    Time moves to each due time in turn, then to ``advance`` seconds after the
    start, so a retry backoff, an ``apply_in``, a periodic tick or a rate limit's
    next turn within the window runs, in the order it falls due (what cannot start
    within it stays queued). Inside ``isolated`` the app's
    schedules fire as a worker up all along would fire them: the decorated ones
    are written (armed at their next tick) as a worker writes them when it
    starts, and every tick in the window runs once. Failures end as they would
    on a worker (retry, dead letter): look at them through handles or
    ``app.dead_letters()``.

    Args:
        app: the app; inside ``isolated(app)`` when ``advance`` is above 0.
        advance: seconds to move time forward: a finite number from 0 to 100 years.
        limit: the most attempts to run (``DRAIN_LIMIT`` unless said): raise it for
            a test that really runs more.

    Raises:
        ConfigurationError: ``advance`` is no such number (nan, inf, negative, not a
            number), or above 0 outside ``isolated``, or ``limit`` is no whole number
            above 0, or the window holds more than ``DRAIN_TICKS`` ticks of the app's
            schedules (nothing ran).
        RuntimeError: more than ``limit`` attempts ran: it says how many tasks were
            ready as drain began when they were more than ``limit``, else (a task
            that keeps enqueueing work due at once) it names the tasks that ran most.
        BrokerError: Redis could not be reached (outside ``isolated``).
    """
    advance = _seconds(advance, "drain(advance=...)")
    limit = DRAIN_LIMIT if limit is None else limit
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigurationError(f"drain(limit=...) takes a whole number of attempts above "
                                 f"0, got {reprlib.repr(limit)}")
    clock = app.clock
    if advance and not isinstance(clock, TestClock):
        raise ConfigurationError("drain(advance=...) moves time, which only an isolated app "
                                 "allows: call it inside minitask.testing.isolated(app)")
    target_ms = clock.now_ms() + to_ms(advance)
    ran = 0
    _subscribe(app)
    if isinstance(clock, TestClock):
        _publish(app)
        _check_ticks(app, _queues(app), target_ms, advance)
    backlog = _ready(app, _queues(app))
    while True:
        queues = _queues(app)
        worker = app.worker(queues=queues, burst=True, subscriber=SUBSCRIBER)
        before = ran
        while worker.run_once():
            ran += 1
            if ran > limit:
                raise RuntimeError(_over_limit(app, queues, limit, backlog))
        if _queues(app) != queues:
            continue  # a task sent work to a queue this worker did not serve
        if not isinstance(clock, TestClock):
            return ran
        due = [ms for ms in (app.broker.admin.next_due_ms(q) for q in queues)
               if ms is not None] + list(_armed_ticks(app, queues).values())
        # a time already come, at which nothing ran, is passed over: it never will run
        # in this window (the flow's time of a limiter still full, a task not runnable)
        later = [ms for ms in due + _flow_due(app, queues, clock.ms, target_ms)
                 if clock.ms < ms <= target_ms]
        if not later:
            if ran != before and due and min(due) <= clock.ms:
                continue  # (a task ran, and work it scheduled came due meanwhile)
            break
        clock.ms = min(later)
    clock.ms = max(clock.ms, target_ms)
    return ran


def _flow_due(app: Minitask, queues: List[str], after_ms: int, until_ms: int) -> List[int]:
    """When the flow control next tries a limiter or group of ``queues`` (its
    ``flow_due``: a rate limit's next turn, a fair group's return) after ``after_ms``
    and by ``until_ms``: the earliest of each queue, in one round trip (read only; a
    key of another type, or a score that is no time, is none)."""
    with app.broker.transport.errors("read when the limiters are due"):
        pipe = app.broker.client.pipeline(transaction=False)
        for queue in queues:
            pipe.zrangebyscore(app.broker.admin.keys(queue).flow_due, f"({after_ms}",
                               until_ms, start=0, num=1, withscores=True)
        replies = pipe.execute(raise_on_error=False)
    return [int(entry[0][1]) for entry in replies
            if isinstance(entry, list) and entry and float(entry[0][1]).is_integer()]


def _ready(app: Minitask, queues: List[str]) -> Dict[str, int]:
    """The ready tasks of each of ``queues`` that holds any (as drain begins)."""
    counted = app.broker.queues.counts_many(queues) if queues else {}
    return {queue: counts["ready"] for queue, counts in counted.items() if counts["ready"]}


def _over_limit(app: Minitask, queues: List[str], limit: int, backlog: Dict[str, int]) -> str:
    """Why drain ran past ``limit``: a backlog larger than it as drain began, said as
    such (no task need enqueue more), else the tasks that ran most (``_busiest``), which
    may keep enqueueing more."""
    said = f"drain() ran more than its limit of {limit:,} attempts: "
    total = sum(backlog.values())
    if total > limit:
        where = (f"queue {next(iter(backlog))!r}" if len(backlog) == 1
                 else f"{len(backlog)} queues")
        return (said + f"{where} held {total:,} tasks ready as it began, more than the "
                f"limit. Raise drain(limit=...) to run them all")
    return (said + f"{_busiest(app, queues)} keep enqueueing more? "
            f"Raise drain(limit=...) if the test runs more")


def _busiest(app: Minitask, queues: List[str]) -> str:
    """The tasks that ran most of the last 100 attempts, as the queues' record of
    recent outcomes tells ("task 'a' (100 of the last 100)"), or "tasks" when it
    keeps none."""
    found, _ = app.broker.recent.read(queues, 100)
    names = Counter(entry.name for entries in found.values() for entry in entries)
    total = sum(names.values())
    if not total:
        return "do tasks"
    shown = ", ".join(f"{name!r} ({count} of the last {total})"
                      for name, count in names.most_common(3))
    return f"does task {shown}" if len(names) == 1 else f"do tasks {shown}"


def _queues(app: Minitask) -> List[str]:
    """The app's queues: those its tasks declare and any a call was sent to (not the
    subscribers' lanes: a worker serves those of its broadcast queues itself)."""
    known = {queue for queue in app.broker.queues.queue_names() if ":" not in queue}
    return sorted(known | set(app.worker_queues()))


def _publish(app: Minitask) -> None:
    """Write the app's decorated schedules, as a worker does when it starts: each is
    armed at its next tick (an unchanged one keeps the tick it has)."""
    decorated = list(app.periodic_schedules.values())
    now_ms = app.clock.now_ms()
    for schedule in decorated:
        app.broker.schedules.save(schedule, schedule.next_after(now_ms))
    if decorated:
        app.broker.queues.register_queues(sorted({s.queue for s in decorated}))


def _armed_ticks(app: Minitask, queues: List[str]) -> Dict[str, int]:
    """Schedule name -> its armed tick (ms), of the schedules of ``queues``."""
    return {entry.name: entry.tick_ms for entry in _armed(app, queues)
            if entry.schedule is not None and entry.tick_ms is not None}


def _armed(app: Minitask, queues: List[str]) -> List[Armed]:
    """The armed schedules of ``queues``, read only from the queues that hold any (a
    count each, in one round trip: a drain of an app with none runs no script for it)."""
    store = app.broker.schedules
    holding = [queue for queue, count in store.counts(queues).items() if count]
    return [entry for entries in (store.armed(holding).values() if holding else ())
            for entry in entries]


def _check_ticks(app: Minitask, queues: List[str], target_ms: int, advance: float) -> None:
    """Refuse a window in which the schedules would fire more than ``DRAIN_TICKS`` ticks
    (counted up to that bound, before anything runs).

    Raises:
        ConfigurationError: naming the schedules that fire most and what to do.
    """
    counts: Dict[str, int] = {}
    total = 0
    for entry in _armed(app, queues):
        tick, schedule = entry.tick_ms, entry.schedule
        while (schedule is not None and tick is not None and tick <= target_ms
               and total <= DRAIN_TICKS):
            counts[entry.name] = counts.get(entry.name, 0) + 1
            total += 1
            tick = schedule.next_after(tick)
    if total > DRAIN_TICKS:
        busiest = sorted(counts.items(), key=lambda item: -item[1])[:3]
        shown = ", ".join(f"{name!r} ({count:,} or more)" for name, count in busiest)
        raise ConfigurationError(
            f"drain: advance={advance:g} would fire "
            f"more than DRAIN_TICKS={DRAIN_TICKS:,} ticks of the app's schedules, each run "
            f"in turn as a worker up all along would: {shown}; drain a shorter window, or "
            f"remove the schedule for this test (app.remove_schedule(name): isolated(app) "
            f"puts it back on exit)")


def _subscribe(app: Minitask) -> None:
    """Subscribe ``SUBSCRIBER`` to the app's broadcast queues (from now on)."""
    for queue in sorted({t.queue for t in app.tasks.values() if t.options.broadcast}):
        app.broker.broadcasts.subscribe(queue, SUBSCRIBER, app.clock.now_ms())
