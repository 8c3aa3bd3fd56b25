"""Recording outcomes: ack, retry or dead letter, one at a time or in batches
(``outcome_batches``).

An outcome, once the attempt has ended, must not be lost: each write goes on
through Redis outages until it succeeds. Listeners hear of each outcome once
it is recorded (the worker counts them).
"""
from __future__ import annotations

import dataclasses
import logging
import random
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import BrokerError, DecodeError, EncodeError, ResultTooLarge, Retry, error_said
from ..log_throttle import LogThrottle
from ..printable import error_text, error_trace, log_error, own_logger, shown_id
from ..stores.bounds import PIECE_BYTES, PIECES_MOST
from ..stores.dead import Buried
from ..stores.results import Ack, ResultStore
from ..wire.message import MAX_ID_BYTES, Message, Outcome, to_ms
from ..wire.serializer import decode_message
from .host import Host
from .leases import Holdings, Job
from .outages import Refused, RefusedTooLong, persist, unless_refused
from .outcome_batches import (UNRECORDABLE, FetchBehindAcks, OutcomeBatches,
                              note_refused, recorded)
from .acl_steps import HELD_REASON, WorkflowStepRefused, released_said
from .workflows import WorkflowSteps

logger = own_logger(__name__)

#: Room left below the server's ``proto-max-bulk-len`` when results are capped by it
#: (bytes): an encoded result is sent as one argument, with its keys and record beside.
BULK_MARGIN = 4096
#: How often at most (s) a worker says, per queue, that dead-letterings deleted old dead
#: letters: a queue at its cap failing 1,000 times a second logs no 1,000 lines a second.
TRIMMED_SAID_EVERY = 60.0

#: Hears of an outcome once it is recorded: the job and its outcome, whose status
#: is "succeeded", "retrying" (another attempt is scheduled) or "failed" (dead letter).
Listener = Callable[[Job, Outcome], None]


class Recorder(OutcomeBatches):
    """Records attempts' outcomes and tells the listeners."""

    def __init__(self, host: Host, holdings: Holdings, fetcher: FetchBehindAcks,
                 stop: threading.Event,
                 wake: Callable[[], None], listeners: Sequence[Listener] = ()) -> None:
        self._host = host
        self._holdings = holdings
        self._fetcher = fetcher
        self._stop = stop
        self._wake = wake
        self.listeners: List[Listener] = list(listeners)
        #: Record successes in batches (a process pool child), not one by one.
        self.batched = False
        #: Carries workflows on before a final outcome is recorded (never after).
        self.workflows = WorkflowSteps(host)
        #: Who records the outcomes, as the record of recent outcomes names it.
        self.worker_name = ""
        #: The server's ``proto-max-bulk-len``, read as the worker started (``limit_to``).
        self.server_limit: Optional[int] = None
        #: Paces the lines saying dead letters were deleted (``trimmed_said``), per queue,
        #: on the host's clock; the worker's fetches bury with it too.
        self.trims = LogThrottle(TRIMMED_SAID_EVERY, clock=lambda: host.clock.now_ms() / 1000,
                                 lock=threading.Lock())

    def limit_to(self, server_limit: int) -> None:
        """Cap results below the server's ``proto-max-bulk-len`` too: a longer one would
        be refused, or the connection reset while it is sent (no outage: sent again, it
        is reset again). Warns when the app's ``max_result_bytes`` is over it; the
        default (``max_message_bytes``, not chosen for results) is capped quietly."""
        self.server_limit = server_limit
        cap, wanted = self.result_cap(), self._host.max_result_bytes
        if wanted > cap and self._host.max_result_bytes_chosen:
            logger.warning("max_result_bytes=%s is over what this Redis takes: results are "
                           "capped at %s bytes, below its proto-max-bulk-len (%s)",
                           f"{wanted:,}", f"{cap:,}", f"{server_limit:,}")
        elif wanted > cap:
            logger.info("results are capped at %s bytes, below this Redis's "
                        "proto-max-bulk-len (%s)", f"{cap:,}", f"{server_limit:,}")

    def follow(self, supervisor: "Recorder") -> None:
        """A process pool child's recorder: it records under its supervisor's worker
        name (not the child's), with the cap its supervisor read at start."""
        self.worker_name = supervisor.worker_name
        self.server_limit = supervisor.server_limit

    def result_cap(self) -> int:
        """The largest encoded result recorded: ``max_result_bytes``, and below the
        server's ``proto-max-bulk-len`` once read."""
        limit, server = self._host.max_result_bytes, self.server_limit
        return limit if server is None else min(limit, max(server - BULK_MARGIN, 1))

    def finish(self, job: Job, message: Message, value: Any, error: Optional[BaseException],
               duration: float) -> Tuple[str, Optional[BaseException]]:
        """Record an attempt's outcome: ack, retry or dead letter; returns which, as
        "succeeded", "retrying" or "failed" (dead-lettered), and the error recorded:
        ``error``, or one met here (for the hooks, the metrics and the span).

        The app's code that runs while the outcome is made ready is the attempt's: an
        exception's ``__str__`` is read through ``error_text`` (never raises), and
        whatever encoding the return value raises (an EncodeError, a registered type's
        encode function, a ``__repr__``: a KeyboardInterrupt or SystemExit too) is the
        attempt's failure, retried or dead by the task's options like any. Only the
        writes to Redis, which run no code of the app's, raise out of here."""
        now_ms = self._host.clock.now_ms()
        if error is None:
            try:
                outcome, ack = self._encoded(job, message, value, now_ms, duration)
            except BaseException as exc:  # the app's code encoding it; no signal lands
                # here (a worker's come through its relay)
                if isinstance(exc, ResultTooLarge):
                    why = "its result is over " + (
                        "max_result_bytes" if exc.limit == self._host.max_result_bytes
                        else "the server's proto-max-bulk-len")
                else:
                    why = "the return value cannot be encoded" + (
                        "" if isinstance(exc, EncodeError) else
                        f": {type(exc).__name__} raised while encoding it")
                return self._failed(job, message, exc, now_ms, duration, why), exc
            problem = self.workflows.succeeded(message, outcome.value)
            if problem is not None:
                held = isinstance(problem, WorkflowStepRefused)  # requeued, it goes on
                self.bury(job, message, problem, HELD_REASON if held else
                          "its result cannot go on in its workflow", moved_on=held)
                return "failed", problem
            if self.batched:
                fetch = self._defer_ack(job, ack)
                if fetch is not None:
                    self.record_waiting(fetch)
            else:
                try:
                    if not self._record(lambda: self._host.broker.results.ack_many([ack])[0],
                                        job, "record the result of task", final=UNRECORDABLE):
                        return "succeeded", None  # not recorded: it runs again, unheard
                except BrokerError as exc:  # Redis cannot take this result, ever
                    return self._unrecordable(job, message, exc, len(ack[2]), duration,
                                              told=False), exc
            self._succeeded(job, message, outcome, duration)
            return "succeeded", None
        return self._failed(job, message, error, now_ms, duration), error

    def put_aside(self, job: Job, message: Message, value: Any,
                  duration: float) -> Optional[bool]:
        """``finish`` of a batched success in no workflow, writing nothing (the asyncio
        pool's loop): ``_defer_ack``'s answer; what encoding raised is raised."""
        outcome, ack = self._encoded(job, message, value, self._host.clock.now_ms(), duration)
        fetch = self._defer_ack(job, ack)
        self._succeeded(job, message, outcome, duration)
        return fetch

    def _succeeded(self, job: Job, message: Message, outcome: Outcome, duration: float) -> None:
        self._tell(job, outcome)
        if logger.isEnabledFor(logging.INFO):  # else not even its names are built
            logger.info("task %s %s succeeded in %.3f s", message.id, message.task,
                        duration, extra=naming(message.id, message.task))

    def _encoded(self, job: Job, message: Message, value: Any, now_ms: int,
                 duration: float) -> Tuple[Outcome, Ack]:
        """A success's outcome and its ack, encoded; no I/O."""
        task = self._host.tasks[message.task]
        ttl_ms = 0 if task.options.ignore_result else to_ms(task.options.result_ttl)
        results = self._host.broker.results
        # the app's registered types travel as extensions (wire/types.py)
        value = self._host.broker.types.to_wire(value, "return value", task.name)
        outcome = Outcome("succeeded", now_ms, value=value, attempt=message.attempt)
        ack = results.prepare_ack(
            job.queue, job.task_id, outcome, ttl_ms, task_name=task.name,
            flow=job.delivery.flow, slots=job.delivery.slots,
            entry=results.entry(job.task_id, task.name, "succeeded", now_ms,
                                message.attempt, duration, self.worker_name))
        size, limit = len(ack[2]), self.result_cap()
        if size > limit:
            raise self._too_large(task.name, job.task_id, size, limit)
        return outcome, ack

    def _too_large(self, name: str, task_id: str, size: int, limit: int) -> ResultTooLarge:
        """The error of a result over ``limit``, naming the task and what set the limit."""
        start = (f"task {name!r} (id {task_id}) returned a value whose encoded result is "
                 f"{size:,} bytes, over ")
        if limit == self._host.max_result_bytes:
            return ResultTooLarge(
                f"{start}max_result_bytes={limit:,}; return a reference (a key or a URL) "
                f"to the data instead, or raise the app's max_result_bytes",
                task_name=name, size=size, limit=limit)
        return ResultTooLarge(
            f"{start}the {limit:,} bytes the Redis server takes (its proto-max-bulk-len is "
            f"{self.server_limit:,}; max_result_bytes={self._host.max_result_bytes:,}); "
            f"return a reference (a key or a URL) to the data instead, or raise the "
            f"server's proto-max-bulk-len", task_name=name, size=size, limit=limit)

    def _failed(self, job: Job, message: Message, error: BaseException, now_ms: int,
                duration: float, why: str = "") -> str:
        """A failed attempt: retried by the task's options, else dead; ``why`` it failed
        when the task did not raise ``error`` itself."""
        task = self._host.tasks[message.task]
        options = task.options
        retryable = is_retried(error, options.retry_on)
        if retryable and message.attempt <= options.retries:
            delay = error.delay if isinstance(error, Retry) else None
            if delay is None:
                cap = min(options.retry_backoff_max,
                          options.retry_backoff * 2 ** (message.attempt - 1))
                delay = random.uniform(0, cap)
            note = failure(error, "retrying", now_ms, message.attempt, why)
            following = dataclasses.replace(message, attempt=message.attempt + 1)
            due_ms = now_ms + to_ms(delay)
            results = self._host.broker.results
            entry = results.entry(job.task_id, task.name, "retried", now_ms, message.attempt,
                                  duration, self.worker_name, short_error(error))
            if not self._record(lambda: results.retry(job.queue, following, due_ms, note,
                                                      entry), job, "schedule a retry of task"):
                return "retrying"  # not scheduled: it runs again when its lease expires
            self._tell(job, note)
            logger.warning("task %s %s failed on attempt %d (%s%s) in %.3f s; attempt %d "
                           "in %.3f s", message.id, task.name, message.attempt,
                           error_said(type(error).__name__, note.message),
                           f"; {why}" if why else "",
                           duration, message.attempt + 1, delay,
                           extra=naming(message.id, task.name))
            return "retrying"
        if not retryable:
            reason = why or "failed"
        else:
            reason = f"{why}; out of attempts" if why else "out of attempts"
        self.bury(job, message, error, reason, duration)
        return "failed"

    def bury(self, job: Job, message: Optional[Message], error: BaseException,
             reason: str, duration: Optional[float] = None, *, moved_on: bool = False,
             told: bool = False) -> None:
        """Dead-letter a leased task, with the error and why; logged at ERROR with the
        traceback whatever the reason, so that a task that ends dead is never silent.
        ``moved_on``: its workflow already went on with its success (not ended dead
        too); ``told``: the listeners heard that success (not told of this too)."""
        outcome = failure(error, "failed", self._host.clock.now_ms(),
                          message.attempt if message else 0, reason)
        took = "" if duration is None else f" after {duration:.3f} s"
        name = message.task if message else "(undecodable)"
        # what is shown of the id is bounded: a planted one (no producer sends one over
        # MAX_ID_BYTES) may be megabytes; it keeps no result, which no handle waits for
        shown, overlong = shown_id(job.delivery.task_id), len(job.delivery.task_id) > MAX_ID_BYTES
        said = "task %s %s is dead (%s%s, in queue %r): %s; see minitask dead show -A APP %s"
        # (worded as TaskFailed words it: an empty message, the type alone)
        args = (shown, name, reason, took, job.queue,
                error_said(type(error).__name__, outcome.message), shown)
        # the traceback goes with the record, bounded like the outcome's (``log_error``:
        # formatted once, guarded, whatever the app's exception does as it is read)
        log_error(logger, logging.ERROR, said, *args, error=error,
                  extra=naming(shown, message.task if message else ""))
        if not moved_on:
            self.workflows.ended_dead(message, outcome)
        results = self._host.broker.results
        entry = results.entry(shown, name, "dead", outcome.finished_at_ms,
                              outcome.attempt, duration, self.worker_name, short_error(error))
        buried = [Buried(False)]

        def bury() -> bool:
            buried[0] = results.bury(
                job.queue, job.delivery.task_id, outcome=outcome,
                result_ttl_ms=0 if overlong else to_ms(self._host.result_ttl), entry=entry)
            return bool(buried[0])
        if self._record(bury, job, "dead-letter task") and not told:
            self._tell(job, outcome)
        trimmed_said(results, job.queue, buried[0].deleted, self.trims)

    def cancelled(self, job: Job, message: Message, duration: float) -> None:
        """Record an attempt stopped by ``cancel(running=True)``: it ends cancelled,
        never retried. If the attempt finished first, its own outcome stays."""
        task = self._host.tasks.get(message.task)
        ttl_ms = to_ms(task.options.result_ttl if task is not None else self._host.result_ttl)
        outcome = Outcome("cancelled", self._host.clock.now_ms(), exc_type="Cancelled",
                          message=f"task {message.task!r} was stopped while running, on "
                          f"request (cancel(running=True))", attempt=message.attempt)
        cancels, results = self._host.broker.cancels, self._host.broker.results
        entry = results.entry(job.task_id, message.task, "cancelled", outcome.finished_at_ms,
                              message.attempt, duration, self.worker_name,
                              "Cancelled: stopped while running, on request")
        what = f"record the cancellation of task {job.task_id}"
        try:
            ended = persist(unless_refused(lambda: cancels.end(
                job.queue, job.task_id, outcome, ttl_ms, entry, results.recent_length)), what,
                refused_for=self._host.visibility_timeout)
        except RefusedTooLong as exc:  # given up: its lease expires, it comes again
            ended = False
            logger.error("%s", released_said(self._host.broker, job.queue, job.delivery.task_id,
                                             what, exc.bound, exc.error))
        self._holdings.drop(job.task_id)
        if isinstance(ended, Refused):
            ended.say(what)
        elif ended:
            self.workflows.cancelled(message, outcome)  # only once its own outcome stands
            self._tell(job, outcome)
            logger.info("task %s %s cancelled while running, after %.3f s", message.id,
                        message.task, duration, extra=naming(message.id, message.task))

    def _unrecordable(self, job: Job, message: Optional[Message], refused: BrokerError,
                      size: int, duration: Optional[float], told: bool) -> str:
        """Redis refused a success's result as no command it can read (over its
        ``proto-max-bulk-len``): sent again it would be refused again; the task is
        dead-lettered instead, saying so, not ended dead in its workflow, which went on
        with the value already; ``told``: the listeners heard the success."""
        name = message.task if message else "(undecodable)"
        error = ResultTooLarge(
            f"task {name!r} (id {job.task_id}): Redis refused its result of {size:,} bytes "
            f"({refused}); keep max_result_bytes ({self._host.max_result_bytes:,}) below "
            f"the server's proto-max-bulk-len", task_name=name, size=size,
            limit=self._host.max_result_bytes)
        self.bury(job, message, error, "Redis refused its result", duration, moved_on=True,
                  told=told)
        return "failed"

    def _record(self, step: Callable[[], Any], job: Job, what: str,
                final: Tuple[str, ...] = ()) -> bool:
        """Write an outcome, retrying through outages: it must not be lost. One Redis
        refuses for the queue's own data is not retried (``unless_refused``), nor one its
        ACL refuses past ``visibility_timeout`` (``RefusedTooLong``): False, said, and
        nobody is told of it (its lease expires, it runs again); one of a reason in
        ``final`` is raised (see ``persist``)."""
        what = f"{what} {shown_id(job.delivery.task_id)}"

        def noted() -> Any:
            try:
                return step()
            except BrokerError as exc:
                note_refused([job], exc)
                raise
        try:
            held = persist(unless_refused(noted), what, final,
                           refused_for=self._host.visibility_timeout)
        except RefusedTooLong as exc:  # nothing could be written: the task comes again
            self._holdings.drop(job.delivery.task_id)
            logger.error("%s", released_said(self._host.broker, job.queue, job.delivery.task_id,
                                             what, exc.bound, exc.error))
            return False
        self._holdings.drop(job.delivery.task_id)
        if isinstance(held, Refused):
            held.say(what)
            return False
        recorded(job, held is not False, self._holdings, self._host)
        return True

    def _tell(self, job: Job, outcome: Outcome) -> None:
        for listener in self.listeners:
            listener(job, outcome)


def bury_poisoned(host: Host, queue: str, task_id: str, trims: Optional[LogThrottle] = None
                  ) -> Tuple[Optional[Message], BaseException]:
    """Dead-letter a task that killed its worker ``max_deliveries`` times (a fetch reports
    it); its message (None: undecodable, or another fetch buried it) and what it died of.
    ``trims``: the Recorder's (``trimmed_said``)."""
    said, size, body = "", 0, None
    try:  # a large message in pieces: Redis may close the connection of one reply of it
        body, size = host.broker.queues.message_pieces(queue, task_id)
        message: Optional[Message] = decode_message(body or b"")
    except DecodeError:
        message = None  # dead-lettered as it is; no workflow can be carried on
    if size > PIECE_BYTES:  # (probe35 M1: every fetch of it cut, none could run it)
        said = (f"; its message is {size:,} bytes{'' if body else ', not read'}: a "
                f"fetch's reply carrying it may be over the server's "
                f"client-output-buffer-limit, and Redis then closes the connection")
    error = RuntimeError(f"the worker died while running it {host.max_deliveries} "
                         f"times (max_deliveries={host.max_deliveries}), or Redis refused "
                         f"to record its outcome (the workers' logs say which){said}")
    outcome = Outcome("failed", host.clock.now_ms(), exc_type="WorkerLost",
                      message=str(error), reason="worker lost")
    if size and body is None:
        logger.error("task %s of queue %r: its message of %s bytes is not read, over the "
                     "%s bytes a burial reads: the workflow it may be a step of is not "
                     "carried on", task_id, queue, f"{size:,}", f"{PIECE_BYTES * PIECES_MOST:,}")
    WorkflowSteps(host).ended_dead(message, outcome)
    results, name = host.broker.results, message.task if message else "?"
    buried = results.bury(
        queue, task_id, outcome=outcome, result_ttl_ms=to_ms(host.result_ttl),
        entry=results.entry(task_id, name, "dead", outcome.finished_at_ms,
                            message.attempt if message else 0, None, "", short_error(error)))
    if not buried:
        return None, error  # no longer leased: another fetch (its expired lease) buried it
    trimmed_said(results, queue, buried.deleted, trims)
    logger.error("dead-lettered task %s from queue %r: %s", task_id, queue, error)
    return message, error


def trimmed_said(results: ResultStore, queue: str, deleted: int,
                 trims: Optional[LogThrottle]) -> None:
    """A WARNING when dead-letterings deleted the queue's oldest dead letters (its bounds,
    bury.lua): never silent, but at most one line a queue every ``TRIMMED_SAID_EVERY``
    seconds (``trims``: the Recorder's pace, on the host's clock; None: said at once),
    saying how many since the last; those deleted after a queue's last line are said by
    its next, if any (``minitask status`` shows how many in all)."""
    if deleted and trims is not None:
        deleted = trims.note(queue, deleted)
    if not deleted:
        return
    ttl = results.dead_bounds.ttl
    logger.warning("queue %r: %d oldest dead letter(s) deleted as tasks joined them since "
                   "the last such line (at most one a minute), past dead_letters_max=%d or "
                   "dead_letters_ttl=%s (minitask status counts them)", queue, deleted,
                   results.dead_bounds.most,
                   "None" if ttl is None else f"{ttl:,.3f}".rstrip("0").rstrip(".") + " s")


def short_error(error: BaseException) -> str:
    """An error as the record of recent outcomes keeps it: type and message."""
    return error_said(type(error).__name__, error_text(error))


def failure(error: BaseException, status: str, now_ms: int, attempt: int,
            reason: str) -> Outcome:
    """A failed attempt's outcome; the error's text and traceback are read guarded
    (``error_text``): an exception whose ``__str__`` raises is recorded by its type."""
    return Outcome(status, now_ms, exc_type=type(error).__name__, message=error_text(error),
                   traceback=error_trace(error), reason=reason, attempt=attempt)


def is_retried(error: BaseException, retry_on: Tuple[type, ...]) -> bool:
    """Whether the task's options retry ``error``: a ``Retry``, or one of ``retry_on``
    (whose own ``__instancecheck__`` is the app's code: if it raises, not retried)."""
    try:
        return isinstance(error, Retry) or isinstance(error, retry_on)
    except BaseException:  # the app's code, whatever it raises: a check that fails
        return False


def naming(task_id: str, task_name: str) -> Dict[str, str]:
    """A log record's ``extra`` naming its task, for lines logged outside the task's
    context (the outcome's), so that JSON logs can be filtered by task."""
    return {"task_id": task_id, "task_name": task_name}
