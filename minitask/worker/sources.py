"""Where work comes from: the queues, served in the order given.

A source hands out leased jobs one at a time and knows how to wait for more;
the loop asks nothing else of it. Schedules (``ticks.TickSource``) or broadcast
subscriptions are sources in front of ``QueueSource``, not branches in the loop.
"""
from __future__ import annotations

import threading
from time import monotonic
from time import monotonic as renewals_clock  # (a clock of its own: not the looks')
from typing import Any, Callable, FrozenSet, List, Optional, Protocol, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import WaitRefused
from ..errors import BrokerError
from ..log_throttle import LogThrottle
from ..printable import own_logger, printable
from ..stores.queue import FetchResult, FetchTerms
from ..stores.results import Ack
from ..wire.message import Message, SystemClock
from .burials import Burials
from .empties import EmptyQueues
from .expiry import end_expired
from .host import Host
from .leases import Holdings, Job, Leases, fetched_from, lease_of
from .outages import MAX_ASIDE, QueueRefusals, guarded
from .outcomes import bury_poisoned
from .stop import Stop

logger = own_logger(__name__)

#: Most tasks a worker leases in one fetch (also bounds one batched ack).
MAX_PREFETCH = 1000
#: Longest a look behind outcomes stands for a fetch of the first queue, in seconds,
#: however long its round trip took: a round trip held up (a stalled server, a
#: reconnect, a GIL-starved thread) would otherwise let the second queue be served
#: first for as long, while tasks come to the first.
LOOK_MOST = 0.010
#: What a fetch behind other calls leased when there was none (the first queue set aside).
NOTHING = FetchResult([], [], None)
#: A fetch behind outcomes that leased nothing: (monotonic time its reply came, how
#: long it stands for a fetch of the first queue: its round trip, at most
#: ``LOOK_MOST``, in seconds; the next event it found, ms on the app's clock; the
#: index of the queue it fetched: the first not set aside).
Look = Tuple[float, float, Optional[int], int]


class _Looked(threading.local):
    """Each thread's last fetch behind outcomes: what it found (``Look``) when it
    leased nothing, and the queue it fetched. Class attributes: a miss of
    ``getattr(..., None)`` on a bare ``threading.local`` raises and catches."""

    first: Optional[Look] = None
    queue: Optional[str] = None


class Source(Protocol):
    """What the loop asks of a source of work."""

    def next_job(self) -> Optional[Job]:
        """A leased job to run now, or None when none is ready."""

    def more_due_now(self) -> bool:
        """Work left behind by the last look is due already: look again at once."""

    def wait(self) -> None:
        """Block until work may be ready, or a stop is asked."""


class WaitCalls(Protocol):
    """Script calls to run as a wait ends, in its round trip (a broadcast pull)."""

    def wait_calls(self) -> List[ScriptCall]:
        """The calls (each reads the server's clock), sent with each wait."""

    def waited(self, replies: List[object]) -> None:
        """Take the calls' replies."""


class QueueSource:
    """Leases tasks from the queues, trying them in order, ``prefetch`` at a time."""

    def __init__(self, host: Host, queues: List[str], prefetch: int, holdings: Holdings,
                 leases: Leases, stop: Stop) -> None:
        self._host = host
        self.queues = queues
        self.prefetch = prefetch
        #: The prefetch the worker was given, which a fetch behind outcomes leases
        #: (``prefetch`` may be raised above it for a moment by the asyncio pool, as
        #: slots free up: ``lease_up_to``).
        self.given_prefetch = prefetch
        self._holdings = holdings
        self._leases = leases
        self._stop = stop
        #: When the last fetch found the next task due (ms on the app's clock), if any.
        self.next_event_ms: Optional[int] = None
        #: More queues whose wake lists end a wait, not fetched here (broadcast lanes).
        self.wake_also: List[str] = []
        #: Calls run behind each wait, before its fetch (broadcast pulls), if any.
        self.behind_wait: Optional[WaitCalls] = None
        #: Hears of each task dead-lettered for killing its workers (metrics, hooks).
        self.on_poisoned: Optional[Callable[[Message, BaseException], None]] = None
        #: Paces the lines saying a burial deleted old dead letters: the Recorder's.
        self.trims: Optional[LogThrottle] = None
        #: Poisoned tasks whose burial failed, tried again after a growing wait.
        self.burials = Burials(host)
        # per thread: its last fetch behind outcomes (ack_and_fetch), if it leased
        # nothing: (when its reply came, how long its round trip took, next_event_ms)
        self._looked = _Looked()
        #: The queues set aside, Redis refusing their fetch for their own data.
        self.refusals = QueueRefusals()
        #: The queues (or broadcast lanes) whose wake list holds another type: no wait
        #: is on it while set aside (their tasks are fetched all the same).
        self.wake_refusals = QueueRefusals()
        self._fetch_terms: Optional[FetchTerms] = None  # (``_terms``)
        #: The queues found empty, skipped until a token says work came (``empties``).
        self.empties = EmptyQueues(host.broker.queues)

    def next_job(self) -> Optional[Job]:
        """Lease the best ready tasks, trying the queues in order; hand out the first.

        Up to ``prefetch`` tasks are leased per round trip; the rest wait in this
        worker's buffer, their leases renewed by the heartbeat.
        """
        looked = self._forget_look()
        job = self._holdings.next_buffered(self._stop.event)
        if job is not None or self._holdings.closing or self._stop.is_set():
            return job
        if renewals_clock() > self._leases.renew_by:  # (Redis was away: leases renewed first)
            self._leases.renew_first()
        now_ms = self._host.clock.now_ms()
        next_event: Optional[int] = None
        queues = self.queues
        if looked is not None and self._still_current(looked):
            queues, next_event = queues[looked[3] + 1:], looked[2]
        empties = self.empties
        epoch = empties.epoch
        # (a worker of one queue marks none: ``found`` is for many; no call a task then)
        many = len(self.queues) > 1
        skip: Optional[FrozenSet[str]] = (None if many and empties.any_marked()
                                          else frozenset())
        refusals = self.refusals
        for queue in queues:
            if refusals and refusals.aside(queue):
                continue  # Redis refuses its data: the next queues are served meanwhile
            if skip is None and empties.marked(queue, now_ms):
                skip = empties.skipped(now_ms)  # (Redis asked at the first queue marked)
            if skip and queue in skip:
                continue  # found empty, and no task came to it since: the next are served
            sent = monotonic() if refusals else 0.0
            try:
                result = self._host.broker.queues.fetch(
                    queue, now_ms=now_ms, lease_ms=self._leases.lease_ms, count=self.prefetch,
                    max_deliveries=self._host.max_deliveries,
                    max_bytes=self._host.max_message_bytes)
            except BrokerError as exc:
                if not refusals.refusal(exc):
                    raise  # an outage, or the whole server refusing: the caller backs off
                refusals.refused(queue, exc)
                continue
            if refusals:
                refusals.served(queue, sent)
            self.take(queue, result)
            if many:
                empties.found(queue, result, now_ms, epoch)
            job = self._holdings.next_buffered(self._stop.event)
            if job is not None:
                return job
            if result.next_event_ms is not None:
                next_event = min(result.next_event_ms, next_event or result.next_event_ms)
        later = empties.upcoming(now_ms) if many else None  # (a queue skipped, or not
        if later is not None:  # fetched, has work then)
            next_event = later if next_event is None else min(later, next_event)
        self.next_event_ms = next_event
        return None

    @staticmethod
    def _still_current(looked: Look) -> bool:
        """Whether a look at the first queue behind outcomes, which leased nothing,
        stands for a fetch from it now: when it is younger than its own round trip
        (and than ``LOOK_MOST``).

        A fetch sent now would answer for the queue as it is one round trip (to the
        server and back) from now, and the fetch from the second queue would go
        out only then; a look younger than a round trip is as current as that
        answer. Between the look and the thread's next fetch only the outcome's
        hooks run: a quick one leaves the look current (the second queue's fetch
        goes out at once, a round trip saved per task while the first queue is
        empty), a slow one does not (the first queue is asked again, so that a
        task that came meanwhile is served first)."""
        answered, took = looked[0], looked[1]
        return monotonic() - answered <= took

    def _forget_look(self) -> Optional[Look]:
        """This thread's last look behind outcomes, if any, forgotten: it counts for
        the next fetch or wait of this thread only."""
        looked = self._looked.first
        if looked is not None:
            self._looked.first = None
        return looked

    @property
    def leases(self) -> Leases:
        return self._leases

    def lease_up_to(self, free: int) -> None:
        """The asyncio pool leases as many tasks per round trip as it has free slots
        (at least ``prefetch``, at most ``MAX_PREFETCH``): they all start at once."""
        self.prefetch = max(self.given_prefetch, min(free, MAX_PREFETCH))

    def more_due_now(self) -> bool:
        """The last fetch left work that is due already (it stops after a batch)."""
        return (self.next_event_ms is not None
                and self.next_event_ms <= self._host.clock.now_ms())

    def wait(self, until_ms: Optional[int] = None) -> None:
        """Block on Redis until a task may be ready, a delayed one is due, ``until_ms``
        (another source's next due time, on the app's clock) comes, or a stop."""
        self._forget_look()
        timeout = self.planned_wait(until_ms)
        if self._stop.is_set():
            return
        # A wait that ends at the other source's time (not at Redis's 5 s cap, nor at a
        # task's) has no fetch behind it: that source acts first when it ends, and
        # ending it then costs no CLIENT UNBLOCK.
        behind = (until_ms is None or timeout >= 5.0
                  or (self.next_event_ms is not None and self.next_event_ms <= until_ms))
        guarded(lambda: self._blocking_wait(timeout, behind), "wait for tasks",
                self._stop.event)

    def planned_wait(self, until_ms: Optional[int] = None) -> float:
        """Seconds the next wait lasts unless work comes first (Redis caps it at 5)."""
        due = [ms for ms in (self.next_event_ms, until_ms) if ms is not None]
        if not due:
            return 5.0
        return min(5.0, max(0.0, self._seconds_until(min(due))))

    def ack_and_fetch(self, acks: Sequence[Ack]) -> Tuple[List[bool], FetchResult]:
        """Record outcomes and lease the next tasks of the first queue not set aside
        (``refusals``) in one round trip; which leases were still held, and what was
        leased (see ``take_fetched``): the other queues are fetched at full speed while
        the first is set aside."""
        broker = self._host.broker
        self._looked.first = None
        now_ms = self._host.clock.now_ms()
        epoch = self.empties.epoch
        # the first queue, in the common case (none set aside, one queue or none marked
        # empty): no call a task to find it
        index = (self._first_open(now_ms) if self.refusals.by_queue or (
            len(self.queues) > 1 and self.empties.any_marked()) else 0)
        if index is None:  # every queue set aside (or empty): the next fetch waits
            return (broker.results.ack_many(acks) if acks else []), NOTHING
        if renewals_clock() > self._leases.renew_by:  # renewals late: the acks alone (the
            # thread's next fetch renews the leases held first, ``Leases.renew_first``)
            return (broker.results.ack_many(acks) if acks else []), NOTHING
        first = self._looked.queue = self.queues[index]
        sent = monotonic()
        # an error raised is the acks' (none written); the fetch's comes in its place,
        # the acks written (ack_fetch.lua): they are never recorded twice
        held, reply = broker.results.ack_then(acks, broker.queues.fetch_call(
            first, now_ms, self._terms()))
        if isinstance(reply, BrokerError) and not self.refusals.refusal(reply):
            return held, NOTHING  # an outage: the thread's next fetch of its own meets it
        answered = monotonic()
        result = self.fetched_behind(reply, sent, first)
        if result is None:
            return held, NOTHING
        if len(self.queues) > 1:
            self.empties.found(first, result, now_ms, epoch)
        # none leased: this thread's next fetch may start at the queue after it (and
        # adds the next events of the queues skipped: ``EmptyQueues.upcoming``)
        self._looked.first = (None if result.deliveries else
                              (answered, min(answered - sent, LOOK_MOST), result.next_event_ms,
                               index))
        return held, result

    def _first_open(self, now_ms: int) -> Optional[int]:
        """The index of the first queue neither set aside (``refusals``) nor found empty
        (``empties``; Redis is asked about the marked ones only when that first queue
        is one of them), or None."""
        refusals, empties = self.refusals, self.empties
        if not (refusals or empties.any_marked()):
            return 0  # the first queue (no round trip)
        skip: Optional[FrozenSet[str]] = None  # (asked at the first queue marked)
        for index, queue in enumerate(self.queues):
            if refusals and refusals.aside(queue):
                continue
            if skip is None:
                if not empties.marked(queue, now_ms):
                    return index
                skip = empties.skipped(now_ms)
            if queue not in skip:
                return index
        return None

    def behind_acks_call(self) -> ScriptCall:
        """The fetch from the first queue that ``ack_and_fetch`` sends behind outcomes,
        for a caller that sends it itself (the asyncio pool's loop)."""
        return self._host.broker.queues.fetch_call(self.queues[0], self._host.clock.now_ms(),
                                                   self._terms())

    def _terms(self) -> FetchTerms:
        """The terms of a fetch behind outcomes, made again only when one changes."""
        terms = self._fetch_terms
        lease_ms, count, most = (self._leases.lease_ms, self.given_prefetch,
                                 self._host.max_deliveries)
        if (terms is None or terms.lease_ms != lease_ms or terms.count != count
                or terms.max_deliveries != most):
            terms = self._fetch_terms = FetchTerms(lease_ms, count, most,
                                                   self._host.max_message_bytes)
        return terms

    def fetches_behind(self) -> bool:
        """Whether a fetch from the first queue may go behind other calls: not while
        Redis refuses its data (a fetch of its own tries it again, after a backoff)."""
        return not self.refusals.known(self.queues[0])

    def fetched_behind(self, reply: Any, sent: float,
                       queue: Optional[str] = None) -> Optional[FetchResult]:
        """The result of a fetch from ``queue`` (the first queue) sent behind other
        calls at ``sent`` (monotonic), or None when Redis refused it (``reply`` the
        BrokerError in its place): the queue is set aside. Another BrokerError is
        raised."""
        queue = self.queues[0] if queue is None else queue
        if isinstance(reply, BrokerError):
            if not self.refusals.refusal(reply):
                raise reply
            self.refusals.refused(queue, reply)
            return None
        if queue in self.refusals.by_queue:  # (``known``, with no call a task)
            self.refusals.served(queue, sent)
        return self._host.broker.queues.fetch_result(reply)

    def fetch_call(self, now_ms: int) -> ScriptCall:
        """A fetch from the first queue, to send behind other calls (``take_fetched``)."""
        if renewals_clock() > self._leases.renew_by:  # (Redis was away: leases renewed first)
            self._leases.renew_first()
        return self._host.broker.queues.fetch_call(
            self.queues[0], now_ms,
            FetchTerms(self._leases.lease_ms, self.prefetch, self._host.max_deliveries,
                       self._host.max_message_bytes))

    def take_fetched(self, result: FetchResult, queue: Optional[str] = None) -> None:
        """Hold what a fetch behind other calls leased from ``queue`` (None: the queue
        this thread's last ``ack_and_fetch`` fetched): the first is the calling thread's
        next task (the thread that recorded its outcome runs it), the rest are buffered."""
        if queue is None:
            queue = self._looked.queue or self.queues[0]
        self.take(queue, result, claim=True)

    def take(self, queue: str, result: FetchResult, claim: bool = False) -> None:
        """Hold what a fetch leased, unless the worker is closing; bury the poisoned.

        What was leased is held first: a failure while burying must not leave a
        fresh batch leased to nobody. A poisoned task that could not be buried
        stays leased, its lease pushed ahead by a growing wait (``Burials``): a fetch
        reports it again then.
        """
        jobs: List[Job] = []
        for delivery in result.deliveries:  # a loop: a comprehension makes a function
            jobs.append(Job(queue, delivery))
        held = self._holdings.hold(queue, jobs, claim)
        if jobs and not held:
            self._leases.give_back([lease_of(job) for job in jobs])
        elif jobs:
            self._host.broker.queues.stop_waiting()
        if result.expired:
            end_expired(self._host, queue, result.expired)
        for task_id in result.poisoned:
            try:
                message, error = bury_poisoned(self._host, queue, task_id, self.trims)
            except BrokerError as exc:  # tried again after a wait (its lease held back)
                self.burials.failed(queue, task_id, exc)
                continue
            self.burials.buried(task_id)
            if message is not None and self.on_poisoned is not None:
                self.on_poisoned(fetched_from(queue, message), error)

    def _blocking_wait(self, timeout: float, fetch_behind: bool = True) -> None:
        """Wait, and lease from the first queue as it ends (on the app's real clock:
        the fetch reads the server's), with ``behind_wait``'s calls ahead of the fetch
        in the same round trip (a wake-up for a broadcast leases it with no pull of
        its own); a stop rings the bell to end it at once.

        Only the wake lists of queues not set aside are waited on; every reply is
        handled, the pulls' first, even when Redis refused the fetch or the wait
        itself (a wake list of another type: its queue is set aside)."""
        if renewals_clock() > self._leases.renew_by:  # (Redis was away: leases renewed first)
            self._leases.renew_first()
        waking = [queue for queue in self.queues + self.wake_also
                  if not (self.refusals.aside(queue) or self.wake_refusals.aside(queue))]
        if not waking:  # every queue set aside: only their backoff ends the wait
            self._stop.event.wait(max(0.0, min(timeout, MAX_ASIDE)))
            return
        terms, behind = None, self.behind_wait
        if fetch_behind and isinstance(self._host.clock, SystemClock) and self.fetches_behind():
            terms = FetchTerms(self._leases.lease_ms, self.prefetch, self._host.max_deliveries,
                               self._host.max_message_bytes)
        queues = self._host.broker.queues
        wakes = [queues.keys(queue).wake for queue in waking]
        refused: Optional[BrokerError] = None
        sent = monotonic()
        try:
            replies = self._host.broker.transport.wait(
                wakes, timeout, interrupt=self._stop.bell_fileno(),
                then=None if terms is None else queues.fetch_call(self.queues[0], None, terms),
                before=behind.wait_calls() if terms is not None and behind is not None else ())
        except WaitRefused as exc:  # the calls behind ran all the same: their replies
            refused, replies = exc, exc.replies
        except BrokerError as exc:  # a wait with no call behind (a cluster's, say)
            if exc.reason != "wrong type":
                raise
            refused, replies = exc, None
        finally:
            self.empties.took_tokens()  # a token taken: its queue is fetched again
        if replies:
            if terms is not None and behind is not None:
                behind.waited(replies[:-1])  # the pulls' leases first: held whatever follows
            result = self.fetched_behind(replies[-1], sent)
            if result is not None:
                self.take(self.queues[0], result)
        if refused is None:
            for queue in waking:
                if self.wake_refusals.known(queue):
                    self.wake_refusals.served(queue, sent)
        elif refused.reason != "wrong type" or not self._set_wake_aside(waking, wakes, refused):
            raise refused

    def _set_wake_aside(self, waking: List[str], wakes: List[str], exc: BaseException) -> bool:
        """Redis refused a wait for a key of another type: set aside the queues whose
        wake list it is (asked only now, with TYPE); whether any was."""
        transport = self._host.broker.transport
        with transport.errors("read the type of the wake lists"):
            pipe = transport.client.pipeline(transaction=False)
            for key in wakes:
                pipe.type(key)
            types = pipe.execute()
        found = False
        for queue, key, kind in zip(waking, wakes, types):
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
            if kind not in ("list", "none"):
                found = True
                self.wake_refusals.refused(queue, BrokerError(
                    f"could not wait for tasks: Redis refused the wait ({exc}); minitask key "
                    f"{key} holds a {printable(kind)}, not the list minitask keeps there",
                    reason="wrong type"))
        return found

    def _seconds_until(self, due_ms: int) -> float:
        """Seconds until the app's clock reads ``due_ms``.

        The real clock is read to the microsecond (plus a hair, so the wait never
        ends just short of the due millisecond): counting from a whole-ms reading
        would wake up to 1 ms late. Other clocks tick in whole ms: one more is waited.
        """
        clock = self._host.clock
        if isinstance(clock, SystemClock):  # (Redis's time, as the app's clock reads it)
            return (due_ms * 1_000_000 - clock.now_ns()) / 1e9 + 0.00005
        return (due_ms + 1 - int(clock.now_ms())) / 1000.0
