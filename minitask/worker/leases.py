"""Leases: what a worker holds, renewing it while it runs, and giving it back.

A task stays in Redis under a lease from the moment it is fetched until its
outcome is recorded; a heartbeat thread renews the leases of running tasks.
``Holdings`` is the one owner of the worker's shared mutable state: every
leased task is in it, prefetched, running, or finished with its outcome not
recorded yet, and each change that spans these states happens under its lock.
"""
from __future__ import annotations

import threading
import time
from collections import deque
import dataclasses
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, NamedTuple, Optional, Set, Tuple

from ..errors import BrokerError
from ..printable import own_logger
from ..stores.queue import Delivery
from ..stores.results import Ack
from ..wire.message import Message, quick_init
from .host import Host
from .outages import RIDDEN_OUT

logger = own_logger(__name__)

#: A lease as the worker holds it: (task id, (queue, priority)).
Lease = Tuple[str, Tuple[str, int]]

#: How much sooner than the worker reckons (ms) a lease may run out: a task fetched as a
#: renewal read the leases held was not renewed with them, its lease a round trip
#: shorter. A lease lost with less than this left may have expired (``lease_left_ms``).
LEASE_MARGIN_MS = 2_000


@quick_init
@dataclass(frozen=True)
class Job:
    """A delivery this worker holds a lease on."""

    queue: str
    delivery: Delivery

    if TYPE_CHECKING:
        @property
        def task_id(self) -> str: ...
    else:
        #: read some eight times a task: C's own getter, no Python call each time
        task_id = property(attrgetter("delivery.task_id"))


class Deferred(NamedTuple):
    """What ``Holdings.defer_ack`` saw as it put an outcome aside."""

    first: bool      # no other outcome was waiting
    more: bool       # prefetched tasks wait to run, and the worker is not closing
    since: float     # monotonic time the oldest waiting outcome was put aside


#: In a process pool child only (``count_holdings``): told how many leases the process
#: holds each time that changes, for its supervisor to say how many tasks a child that
#: ended unannounced took with it (they come back once their leases expire).
_counted: Optional[Callable[[int], None]] = None


#: In a process pool child that prefetches only (``count_holdings``): told the tasks not
#: started (claimed, buffered; the one just taken) as they change (``pools.unstarted``).
Waiting = Callable[[Dict[int, Job], Deque[Job], Optional[Job]], None]
_waiting: Optional[Waiting] = None


def count_holdings(counted: Optional[Callable[[int], None]],
                   waiting: Optional[Waiting] = None) -> None:
    """Have ``counted`` told the number of leases held, and ``waiting`` the tasks
    leased and not started, each time they change."""
    global _counted, _waiting
    _counted, _waiting = counted, waiting


class Holdings:
    """The leases this worker holds, and what it holds them for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: Dict[str, Tuple[str, int]] = {}
        self._closing = False
        # Leased tasks not started yet (prefetch), in the order fetched.
        self._buffer: Deque[Job] = deque()
        # The job last taken from the buffer: a process pool child runs one at a time.
        self._running: Optional[Job] = None
        # By thread id: the task a thread leased with its last outcome, to run next
        # itself (no other thread takes it from the buffer in the meantime).
        self._claimed: Dict[int, Job] = {}
        # Outcomes a child has not recorded yet (their tasks stay leased meanwhile).
        self._acks: List[Tuple[Job, Ack]] = []
        self._acks_since = 0.0
        # A lease deadline (ms, the app's clock) that every lease held reaches at least
        # (``leased_until``), but those of ``_lapsed``; None before the first fetch.
        self._leased_until_ms: Optional[int] = None
        self._lapsed: Set[str] = set()

    @property
    def closing(self) -> bool:
        """No task is taken any more: what a fetch leases now is given back."""
        return self._closing

    def close(self) -> Optional[Job]:
        """Take no task any more; the task running in a child, if any."""
        with self._lock:
            self._closing = True
            return self._running

    def hold(self, queue: str, jobs: List[Job], claim: bool = False) -> bool:
        """Hold what a fetch leased, to run in order; False (nothing held) once closing.
        With ``claim``, the first is this thread's next task (``next_buffered``)."""
        with self._lock:
            if self._closing:
                return False
            for job in jobs:
                self._leases[job.task_id] = (queue, job.delivery.priority)
            if claim and jobs:
                self._claimed[threading.get_ident()] = jobs[0]
                jobs = jobs[1:]
            self._buffer.extend(jobs)
            if _counted is not None:  # (``_tell_count`` inline: at every task)
                _counted(len(self._leases))
            if _waiting is not None:
                _waiting(self._claimed, self._buffer, None)
            return True

    def hold_first(self, queue: str, jobs: List[Job]) -> Tuple[bool, Optional[Job]]:
        """``hold``, for the asyncio pool's loop (its slots share one thread, so no claim
        by thread): whether held (not once closing), and the first job, to run now in
        the slot whose outcome leased it; the rest are buffered."""
        with self._lock:
            if self._closing:
                return False, None
            for job in jobs:
                self._leases[job.task_id] = (queue, job.delivery.priority)
            self._buffer.extend(jobs[1:])
            if _counted is not None:  # (``_tell_count`` inline: at every task)
                _counted(len(self._leases))
            return True, jobs[0] if jobs else None

    def next_buffered(self, stop: threading.Event) -> Optional[Job]:
        """The task this thread claimed, else the next prefetched task, now the
        running one; None if closing or stopped."""
        with self._lock:
            if self._closing or stop.is_set():
                return None
            job = self._claimed.pop(threading.get_ident(), None)
            if job is None:
                if not self._buffer:
                    return None
                job = self._buffer.popleft()
            self._running = job
            if _waiting is not None:
                _waiting(self._claimed, self._buffer, job)
        return job

    def put_back(self, job: Job) -> None:
        """A job ``next_buffered`` handed out that will not run now (the fetch failed
        after taking it): first in the buffer again, its lease still held. Dropped,
        its lease was renewed by the heartbeat for as long as the worker lived."""
        with self._lock:
            if self._running is job:
                self._running = None
            if job.task_id in self._leases:
                self._buffer.appendleft(job)
            self._tell_count(waiting=True)

    def clear_running(self) -> None:
        with self._lock:
            self._running = None

    def take_buffered(self) -> List[Job]:
        """Drop the prefetched tasks not started yet, to be given back."""
        with self._lock:
            waiting = [*self._claimed.values(), *self._buffer]
            self._claimed.clear()
            self._buffer.clear()
            for job in waiting:
                self._leases.pop(job.task_id, None)
            self._tell_count(waiting=True)
        return waiting

    def take_unfinished(self) -> List[Lease]:
        """Close, and drop every lease but those of outcomes waiting to be recorded."""
        with self._lock:
            self._closing = True
            self._claimed.clear()
            self._buffer.clear()
            finished = {job.task_id for job, _ in self._acks}
            held = [lease for lease in self._leases.items() if lease[0] not in finished]
            for task_id, _ in held:
                del self._leases[task_id]
            self._tell_count(waiting=True)
        return held

    def drop(self, task_id: str) -> bool:
        """The task's outcome is recorded (or it is given back): its lease is Redis's
        business no more. Whether it was held."""
        with self._lock:
            held = self._leases.pop(task_id, None) is not None
            self._tell_count()
        return held

    def _tell_count(self, waiting: bool = False) -> None:
        """Tell a process pool child's count (``count_holdings``) of the leases held,
        and (``waiting``) the tasks not started: called, under the lock, by each
        method that changes them."""
        if _counted is not None:
            _counted(len(self._leases))
        if waiting and _waiting is not None:
            _waiting(self._claimed, self._buffer, None)

    def held(self) -> List[Lease]:
        with self._lock:
            return list(self._leases.items())

    def leased_until(self, deadline_ms: int, done_ms: int) -> None:
        """Every lease held reaches ``deadline_ms`` at least, and so does every lease
        taken from now on (taken for as long, later): said as the worker starts fetching
        and after each renewal of all the leases held, which ended at ``done_ms``. A
        renewal that ended past the last deadline said (less LEASE_MARGIN_MS) came
        too late: the leases held then may have expired meanwhile (``lease_left_ms``)."""
        with self._lock:
            until = self._leased_until_ms
            if until is not None and done_ms >= until - LEASE_MARGIN_MS:
                # kept until the next late one (its size: the leases held then), so that
                # an outcome recorded after its task left the holdings is judged by it
                self._lapsed = set(self._leases)
            self._leased_until_ms = deadline_ms

    def lease_left_ms(self, task_id: str, now_ms: int) -> Optional[int]:
        """How long before the lease of ``task_id`` could expire, by this worker's
        renewals, none of them late (None: it may have expired already, or the worker
        fetched nothing yet): a lease Redis no longer holds before then did not expire,
        it was lost (``outcome_batches.warn_lost_lease``)."""
        with self._lock:
            until = self._leased_until_ms
            if until is None or task_id in self._lapsed:
                return None
            return until - now_ms

    def started(self, most: int) -> List[str]:
        """The ids of at most ``most`` tasks started and not ended: held, neither
        prefetched (nor claimed by a thread, to run next) nor ended with their outcome
        waiting to be recorded."""
        with self._lock:
            waiting = {job.task_id for job in self._buffer}
            waiting.update(job.task_id for job in self._claimed.values())
            waiting.update(job.task_id for job, _ in self._acks)
            return [task_id for task_id in self._leases if task_id not in waiting][:most]

    # -- outcomes waiting to be recorded in a batch --------------------------

    def defer_ack(self, job: Job, ack: Ack) -> Deferred:
        """Put an outcome aside, to be recorded with the next ones."""
        with self._lock:
            if not self._acks:
                self._acks_since = time.monotonic()
            self._acks.append((job, ack))
            first = len(self._acks) == 1
            more = bool(self._buffer) and not self._closing
        # (made as a tuple: a NamedTuple's own __new__ is a call of Python every task)
        return tuple.__new__(Deferred, (first, more, self._acks_since))

    def acks_since(self) -> Optional[float]:
        """Monotonic time the oldest waiting outcome was put aside; None if none waits."""
        with self._lock:
            return self._acks_since if self._acks else None

    def waiting_acks(self) -> int:
        with self._lock:
            return len(self._acks)

    def take_acks(self) -> List[Tuple[Job, Ack]]:
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def withdraw_acks(self, jobs: List[Job]) -> List[Tuple[Job, Ack]]:
        """Take those of ``jobs``' outcomes still waiting (not those another flush took)."""
        wanted = {id(job) for job in jobs}
        with self._lock:
            taken = [entry for entry in self._acks if id(entry[0]) in wanted]
            if taken:
                self._acks = [entry for entry in self._acks if id(entry[0]) not in wanted]
        return taken

    def restore_acks(self, acks: List[Tuple[Job, Ack]]) -> None:
        """Outcomes that could not be recorded: still leased, recorded by the next try."""
        with self._lock:
            self._acks[:0] = acks

    def settle(self, jobs: List[Job]) -> None:
        """These tasks' outcomes are recorded."""
        with self._lock:
            for job in jobs:
                self._leases.pop(job.task_id, None)
            if _counted is not None:  # (``_tell_count`` inline: at every task)
                _counted(len(self._leases))


#: Heartbeats between two sayings of a worker's lease length (``Leases.say``).
SAY_AGAIN = 15
#: Heartbeat periods after a renewal past which a fetch renews first (``renew_first``).
LATE_AFTER = 1.5


class Leases:
    """The Redis side of the leases in ``Holdings``: renewing and giving back."""

    def __init__(self, host: Host, holdings: Holdings, lease_ms: int, period: float) -> None:
        self._host = host
        self._holdings = holdings
        self.lease_ms = lease_ms
        self._said: Optional[List[str]] = None  # the queues said, once said
        self._renewals, self._late_after = 0, LATE_AFTER * period  # (``period``: heartbeat's)
        #: Monotonic time past which renewals are late: a fetch renews first (``renew_first``).
        self.renew_by = time.monotonic() + self._late_after

    def say(self, queues: List[str]) -> None:
        """Say how long these leases last, for ``queues`` (and lanes), once, before the
        first fetch: each queue keeps the longest any worker said, so that no fetch
        takes a lease of a worker of a longer visibility timeout for one no worker
        holds (``WorkerRegistry.announce_leases``, fetch.lua). Said again every
        ``SAY_AGAIN`` renewals (``renew``): a key deleted since heals."""
        if self._said is None:
            self._host.broker.registry.announce_leases(queues, self.lease_ms)
            self._said = list(queues)
            # (on Redis's time by now: check_redis measured it)
            now_ms = self._host.clock.now_ms()
            self._holdings.leased_until(now_ms + self.lease_ms, now_ms)

    def first_said(self, queues: List[str], fetch: Callable[[], Optional[Job]]
                   ) -> Callable[[], Optional[Job]]:
        """``fetch``, the leases said for ``queues`` (``say``) before the first one, in one
        step that the caller rides outages through (``guarded``). A process pool child
        says them as it starts: one started while Redis is away (in place of one that
        died) must wait for Redis there, as its fetch does, not die of it (replaced at
        once, its successor died too, hundreds of times a second, each with a traceback)."""
        if self._said is not None:
            return fetch

        def step() -> Optional[Job]:
            self.say(queues)
            return fetch()
        return step

    def renew(self, now_ms: int) -> int:
        """Renew the leases of running tasks; how many are held."""
        started, held = time.monotonic(), self._holdings.held()
        for queue, leases in _by_queue(held).items():
            self._host.broker.queues.renew(queue, leases, now_ms + self.lease_ms)
        # every one held renewed (in time, or late: said), and any held since fetched
        # after ``now_ms``
        self._holdings.leased_until(now_ms + self.lease_ms, self._host.clock.now_ms())
        self.renew_by = max(self.renew_by, started + self._late_after)
        self._renewals += 1
        if self._said and self._renewals % SAY_AGAIN == 0:
            try:
                self._host.broker.registry.announce_leases(self._said, self.lease_ms)
            except BrokerError:  # (said at the next turn; the heartbeat says outages)
                pass
        return len(held)

    def renew_first(self) -> None:
        """Before a fetch once renewals are late (``renew_by``: Redis was away, the heartbeat
        backs off): renew every lease held. A fetch takes back each lease past its deadline,
        this worker's too (a task it runs, an outcome not written yet), to run it again. An
        outage is raised (the caller backs off); a refusal is the heartbeat's to say."""
        try:
            self.renew(self._host.clock.now_ms())
        except BrokerError as exc:
            if exc.reason in RIDDEN_OUT:
                raise
            self.renew_by = time.monotonic() + self._late_after
            logger.debug("renewing the leases before a fetch was refused (%s)", exc)

    def give_back(self, held: List[Lease], deliveries: Optional[Dict[str, int]] = None) -> None:
        """Release (task id, (queue, priority)) leases, as ``Holdings`` holds them; with
        ``deliveries``, each only while its count is that (``QueueStore.release``)."""
        for queue, leases in _by_queue(held).items():
            try:
                count = self._host.broker.queues.release(queue, leases, None if deliveries is None
                                                         else [deliveries[t] for t, _ in leases])
                logger.info("gave back %d unfinished task(s) to queue %r", count, queue)
            except BrokerError as exc:
                logger.error("could not give back tasks to queue %r (%s); they will be "
                             "delivered again when their lease expires", queue, exc)

    def give_back_held(self, job: Job) -> None:
        """Give back a job of this process's holdings that will not run, unless it is
        given back already: held no more, its task may run in another worker by now,
        and a second release would take that worker's lease (release.lua knows no
        owner) and queue the task again: two runs at once. Not renewed after."""
        if self._holdings.drop(job.task_id):
            self.give_back([lease_of(job)])
        else:
            logger.debug("task %s was given back already: not again", job.task_id)

    def give_back_buffer(self) -> None:
        """Return the prefetched tasks not started yet, uncounted, to their queues."""
        waiting = self._holdings.take_buffered()
        if waiting:
            self.give_back([lease_of(job) for job in waiting])

    def release_all(self) -> None:
        """Give back every lease held, except those of outcomes waiting to be recorded."""
        held = self._holdings.take_unfinished()
        if held:
            self.give_back(held)


def lease_of(job: Job) -> Lease:
    return job.task_id, (job.queue, job.delivery.priority)


def _by_queue(held: List[Lease]) -> Dict[str, List[Tuple[str, int]]]:
    """(task id, (queue, priority)) leases as (task id, priority) lists per queue."""
    by_queue: Dict[str, List[Tuple[str, int]]] = {}
    for task_id, (queue, priority) in held:
        by_queue.setdefault(queue, []).append((task_id, priority))
    return by_queue


def fetched_from(queue: str, message: Message) -> Message:
    """``message`` naming the queue it was fetched from: its own queue field is what
    its producer wrote, not checked by anyone (a planted message could name any
    text), and it labels metrics and progress. A broadcast lane's messages name
    the lane's queue (``queue:subscriber``: queue names hold no ':')."""
    own = queue.partition(":")[0]
    return message if message.queue == own else dataclasses.replace(message, queue=own)
