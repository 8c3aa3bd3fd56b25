"""Outcomes recorded in batches: put aside, then recorded together, with the next fetch.

A recorder that batches (``Recorder.batched``) puts a success aside while this
worker's buffer holds more tasks, for up to ``ACK_WINDOW``, and records the
outcomes put aside in one round trip, leasing the next tasks in the same one. A
batch Redis refuses as a whole is recorded one outcome at a time, so that one it
can never record holds no other. ``Recorder`` (``outcomes.py``) is built on these.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, List, Optional, Protocol, Sequence, Set, Tuple

from ..errors import BrokerError, DecodeError, DurabilityError
from ..printable import own_logger
from ..stores.queue import FetchResult
from ..stores.results import Ack
from ..wire.message import Message
from .host import Host
from .leases import LEASE_MARGIN_MS, Holdings, Job
from .acl_steps import released_said
from .outages import RIDDEN_OUT, RefusedTooLong, persist, unconfirmed

logger = own_logger("minitask.worker.outcomes")  # the lines a worker has always logged

#: Longest a finished task's outcome waits, in a process pool child with
#: prefetch > 1, to be recorded together with the next ones in one round trip.
ACK_WINDOW = 0.002

#: The refusals of an outcome write that writing it again cannot end: Redis could not
#: read the command (a value over its ``proto-max-bulk-len``), and closed the connection.
UNRECORDABLE = ("protocol",)
#: Refusals that hold for every write alike while they last (Redis over its maxmemory,
#: a read-only replica): a batch refused so is ridden out whole with the caller's
#: backoff, said once by it; recorded one by one, each outcome was refused the same,
#: and the line saying so came at every try, twice a second while Redis stayed full.
EVERY_WRITE = ("out of memory", "read-only")

#: Tasks whose outcome Redis refused to record for the ACL (an ACL changed while the
#: worker runs), until it is recorded: a lease lost meanwhile is told with that cause.
#: The outcome scripts remove a lease last (ack.lua), so a refusal itself never drops it.
_refused: Set[str] = set()
#: Most ids kept there (a bound, should outcomes never be recorded).
_REFUSED_MOST = 10_000
#: Tasks whose outcome write lost its reply (``BrokerError.sent`` of an outage: the
#: connection failed or timed out once the write was sent, as after a stall past the
#: socket timeout), until it is recorded: that write most likely recorded it, and
#: removed the lease, so a lease the retry finds gone is told so, not as a loss of
#: Redis's. Bounded as ``_refused`` is.
_unanswered: Set[str] = set()


class FetchBehindAcks(Protocol):
    """A source that leases the next tasks in the round trip that records outcomes
    (``QueueSource``)."""

    def ack_and_fetch(self, acks: Sequence[Ack]) -> Tuple[List[bool], FetchResult]: ...

    def take_fetched(self, result: FetchResult) -> None: ...


class OutcomeBatches:
    """The batches of a ``Recorder`` (its base class): what waits, and its flush."""

    _host: Host
    _holdings: Holdings
    _fetcher: FetchBehindAcks
    _stop: threading.Event
    _wake: Callable[[], None]
    #: Dead-letters a success whose result Redis can never take (``Recorder``'s).
    _unrecordable: Callable[..., str]
    #: Monotonic time the heartbeat's flush (``flush_if_overdue``) was first refused
    #: for the ACL, since its last try that was not.
    _overdue_refused: Optional[float] = None

    def waiting(self) -> int:
        """Outcomes put aside, not recorded yet."""
        return self._holdings.waiting_acks()

    def record_waiting(self, fetch: bool = False) -> None:
        """Record the waiting outcomes, retrying through outages: they must not be lost.
        Those Redis's ACL refuses past ``visibility_timeout`` are given up: their slots
        freed, their leases expire (not renewed), their tasks are delivered again. Only
        those the last try was refused (``tried``): one put aside since was never tried."""
        tried: List[Tuple[Job, Ack]] = []
        try:
            persist(lambda: self.flush(fetch, tried), "record results",
                    refused_for=self._host.visibility_timeout)
        except RefusedTooLong as exc:
            self._give_up(tried, exc)

    def _give_up(self, tried: List[Tuple[Job, Ack]], exc: RefusedTooLong) -> None:
        """Give up the outcomes of ``tried`` still waiting (one another flush holds now is
        that flush's); one ERROR for them, none if none is left."""
        acks = self._holdings.withdraw_acks([job for job, _ in tried])
        if not acks:
            return
        self._holdings.settle([job for job, _ in acks])
        ids = ", ".join(job.delivery.task_id for job, _ in acks[:5])
        more = f" and {len(acks) - 5} more" if len(acks) > 5 else ""
        first = acks[0][0]
        logger.error("%s", released_said(
            self._host.broker, first.queue, first.delivery.task_id,
            f"record the results of task(s) {ids}{more}", exc.bound, exc.error))

    def flush(self, fetch: bool, tried: Optional[List[Tuple[Job, Ack]]] = None) -> None:
        """Record the waiting outcomes in one round trip; with ``fetch``, lease the next
        tasks of the first queue in the same round trip. Those Redis refused are put
        back to wait, and into ``tried`` (emptied first): what a caller may give up."""
        if tried is not None:
            tried.clear()
        acks = self._holdings.take_acks()
        # a fetch behind acks that replicas must confirm would be lost with them when
        # they fall short (its leases held by nobody): then the worker fetches on its own
        fetch = fetch and not self._host.broker.transport.confirms_writes()
        if not acks and not fetch:
            return
        jobs: List[Job] = []
        entries: List[Ack] = []
        for job, ack in acks:
            jobs.append(job)
            entries.append(ack)
        result: Optional[FetchResult] = None
        try:
            if fetch:
                held, result = self._fetcher.ack_and_fetch(entries)
            else:
                held = self._host.broker.results.ack_many(entries)
        except DurabilityError as exc:
            # written, not confirmed: not written again (a replica that stays down would
            # hold the worker for ever), and no lease is known lost
            self._holdings.settle(jobs)
            unconfirmed("record the results of task(s) " + ", ".join(
                job.delivery.task_id for job in jobs), exc)
            return
        except BrokerError as exc:
            note_refused(jobs, exc)
            if exc.reason in RIDDEN_OUT or exc.reason in EVERY_WRITE or (
                    len(acks) < 2 and exc.reason not in UNRECORDABLE):
                self._holdings.restore_acks(acks)
                if tried is not None:
                    tried[:] = acks
                raise
            # Redis refused the batch, not an outage: one outcome it cannot record (a
            # result over its proto-max-bulk-len...) must not hold the others, nor itself
            self._one_by_one(acks, exc, tried)
            return
        self._holdings.settle(jobs)
        for job, still_held in zip(jobs, held):
            recorded(job, still_held, self._holdings, self._host)
        if result is not None:
            self._fetcher.take_fetched(result)

    def _one_by_one(self, acks: List[Tuple[Job, Ack]], exc: BrokerError,
                    tried: Optional[List[Tuple[Job, Ack]]]) -> None:
        """Record a batch Redis refused as a whole one outcome at a time, so that one it
        cannot record (a result over its proto-max-bulk-len...) holds no other: those
        refused again wait for the next try (the caller's backoff), the others are
        recorded. One a script of the batch wrote before the refusal reads as a lost
        lease now, so none is warned of here (each lease is dropped all the same)."""
        logger.warning("Redis refused to record %d outcome(s) together (%s); recording "
                       "them one by one", len(acks), exc)
        failed: List[Tuple[Job, Ack]] = []
        first: Optional[BrokerError] = None
        for index, (job, ack) in enumerate(acks):
            try:
                self._host.broker.results.ack_many([ack])
            except DurabilityError as unsure:
                unconfirmed(f"record the result of task {job.delivery.task_id}", unsure)
            except BrokerError as refused:
                note_refused([job], refused)
                if refused.reason in UNRECORDABLE:  # this one never will be: dead instead
                    try:
                        message: Optional[Message] = job.delivery.message()
                    except DecodeError:
                        message = None
                    self._unrecordable(job, message, refused, len(ack[2]), None, told=True)
                    continue
                first = first or refused
                if refused.reason in RIDDEN_OUT or refused.reason in EVERY_WRITE:
                    # an outage now, or Redis full: the rest wait too
                    failed += acks[index:]
                    break
                failed.append((job, ack))
                continue
            self._holdings.settle([job])
        if first is not None:
            self._holdings.restore_acks(failed)
            if tried is not None:
                tried[:] = failed
            raise first

    def flush_last(self) -> None:
        """As a worker ends (no task runs, its heartbeat has ended): record the outcomes
        put aside; if Redis fails, their tasks come back when their leases expire."""
        try:
            self.flush(fetch=False)
        except BrokerError as exc:
            logger.error("could not record %d result(s) (%s); their tasks will be "
                         "delivered again when their lease expires", self.waiting(), exc)

    def flush_due_at(self) -> Optional[float]:
        """Monotonic time by which the waiting outcomes are to be recorded, if any wait."""
        since = self._holdings.acks_since()
        return None if since is None else since + ACK_WINDOW

    def flush_if_overdue(self) -> None:
        """The heartbeat's: record the outcomes waiting past ``ACK_WINDOW`` (their slot
        runs a long next task). Those Redis's ACL refuses past ``visibility_timeout``
        are given up, as ``record_waiting`` gives up its own (not renewed for ever)."""
        since = self._holdings.acks_since()
        if since is None:
            self._overdue_refused = None
            return
        if time.monotonic() - since < ACK_WINDOW:
            return
        tried: List[Tuple[Job, Ack]] = []
        try:
            self.flush(False, tried)
        except BrokerError as exc:
            if exc.reason != "permission":
                self._overdue_refused = None
                raise
            now = time.monotonic()
            first = self._overdue_refused = self._overdue_refused or now
            bound = self._host.visibility_timeout
            if now - first < bound:
                raise
            self._overdue_refused = None
            self._give_up(tried, RefusedTooLong("record results", exc, bound))
            return
        self._overdue_refused = None

    def _defer_ack(self, job: Job, ack: Ack) -> Optional[bool]:
        """Put an outcome aside; None while the buffer holds more tasks, for up to
        ``ACK_WINDOW``; else record them now: with the next fetch (True), or not."""
        deferred = self._holdings.defer_ack(job, ack)
        if deferred.more and time.monotonic() - deferred.since < ACK_WINDOW:
            if deferred.first:
                self._wake()  # the heartbeat records them if the next task runs long
            return None
        return not deferred.more and not self._stop.is_set()


def note_refused(jobs: Iterable[Job], exc: BrokerError) -> None:
    """Remember tasks whose outcome Redis refused for the ACL (``permission``), or whose
    write lost its reply (``sent``, the link lost: Redis may have made it; not a
    refusal part way, which leaves the lease), for ``warn_lost_lease``."""
    if exc.reason == "permission":
        _kept(_refused, jobs)
    if exc.sent and exc.reason == "unreachable":
        note_unanswered(jobs)


def note_unanswered(jobs: Iterable[Job]) -> None:
    """Remember tasks whose outcome write lost its reply (``_unanswered``)."""
    _kept(_unanswered, jobs)


def _kept(kept: Set[str], jobs: Iterable[Job]) -> None:
    if len(kept) > _REFUSED_MOST:
        kept.clear()
    kept.update(job.task_id for job in jobs)


def recorded(job: Job, still_held: bool, holdings: Holdings, host: Host) -> None:
    """An outcome recorded: warn if its lease was lost meanwhile, saying why as far as
    this worker can tell (``holdings``: how long its leases had left)."""
    if still_held:
        _refused.discard(job.task_id)
        _unanswered.discard(job.task_id)
    else:
        warn_lost_lease(job, holdings, host)


def warn_lost_lease(job: Job, holdings: Holdings, host: Host) -> None:
    """Say that Redis held no lease for ``job`` as its outcome was recorded: removed by
    an earlier write of it whose reply was lost (``_unanswered``); refused for the ACL
    until it expired; gone before it could expire, by the worker's renewals
    (``Holdings.lease_left_ms``: Redis lost it); or expired, or maybe so."""
    left_ms = holdings.lease_left_ms(job.task_id, host.clock.now_ms())
    held_on = left_ms is not None and left_ms > LEASE_MARGIN_MS
    if job.task_id in _unanswered:
        _unanswered.discard(job.task_id)
        _refused.discard(job.task_id)
        said = ("task %s: its outcome was written again, its first write's reply having "
                "been lost (the connection failed or timed out once the write was sent: a "
                "stall past the socket timeout...), and found no lease: it was most likely "
                "recorded by that write, which removes the lease")
        if held_on:
            logger.info(said, job.task_id)
        else:  # the lease may have run out before that write: then it may run again
            logger.warning(said + "; or its lease had expired before that write and it may "
                           "have been delivered again; raise visibility_timeout if tasks "
                           "stall this long", job.task_id)
        return
    if job.task_id in _refused:
        _refused.discard(job.task_id)
        logger.warning("task %s: Redis refused to record its outcome for the ACL (see the "
                       "error above: an ACL changed while the worker ran) until its lease "
                       "had expired, and it may have been delivered again; give the user "
                       "every command of the docs' ACL list", job.task_id)
        return
    if left_ms is not None and held_on:
        logger.warning("task %s: Redis no longer held its lease, %.0f s before the lease "
                       "could expire (this worker renewed it): Redis lost it, likely with the "
                       "rest of the task's data (a restart without persistence, a failover to "
                       "a replica that was behind, a flush or a deleted key), not expiry",
                       job.task_id, left_ms / 1000)
        return
    logger.warning("task %s: its lease had expired (Redis away, or this worker stalled, "
                   "past its renewals) and it may have been delivered again; raise "
                   "visibility_timeout if tasks stall this long", job.task_id)
