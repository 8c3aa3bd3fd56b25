"""Worker: fetch -> run -> ack / retry / dead-letter, with leases, signals and grace.

A task stays in Redis under a lease from the moment it is fetched until its
outcome is recorded; a heartbeat thread renews the leases of running tasks.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Tuple

from ..broker import Ack, Delivery, FetchResult, FetchTerms, RedisBroker
from ..context import running
from ..errors import (BrokerError, ConfigurationError, DecodeError, EncodeError, Retry,
                      TimeLimitExceeded, UnknownTaskError)
from ..message import Message, Outcome, SystemClock, to_ms
from ..pool import ProcessPool, ThreadPool

if TYPE_CHECKING:
    from ..app import Minitask

logger = logging.getLogger(__name__)

#: Longest pause between reconnection attempts while Redis is away.
MAX_BACKOFF = 5.0
#: Most tasks a worker leases in one fetch (also bounds one batched ack).
MAX_PREFETCH = 1000
#: Longest a finished task's outcome waits, in a process pool child with
#: prefetch > 1, to be recorded together with the next ones in one round trip.
ACK_WINDOW = 0.002


def check_prefetch(value: Any, owner: str) -> int:
    """``value`` if it is a valid prefetch; ``owner`` names the app or worker in the error."""
    if not isinstance(value, int) or not 1 <= value <= MAX_PREFETCH:
        raise ConfigurationError(f"{owner}: prefetch must be an int from 1 to {MAX_PREFETCH}, "
                                 f"got {value!r}")
    return value


@dataclass(frozen=True)
class Job:
    """A delivery this worker holds a lease on."""

    queue: str
    delivery: Delivery

    @property
    def task_id(self) -> str:
        return self.delivery.task_id


class _Bell:
    """A socket pair that turns readable once rung: a wait on Redis watches it, so a
    stop (a signal, or ``stop()`` from another thread) ends the wait at once,
    without raising from a signal handler into the middle of a reply.

    Sockets, not a raw pipe: once closed, a late ring fails instead of writing
    to whatever file reuses the number.
    """

    def __init__(self) -> None:
        self._heard, self._rung = socket.socketpair()
        self._rung.setblocking(False)

    def fileno(self) -> int:
        return self._heard.fileno()

    def ring(self) -> None:
        try:
            self._rung.send(b"!")
        except OSError:
            pass  # already rung (the buffer is full) or closed

    def close(self) -> None:
        self._rung.close()
        self._heard.close()


class Backoff:
    """Capped exponential backoff with full jitter; logs only when the state changes."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        if self.failures == 0:
            logger.error("lost Redis while trying to %s: %s; retrying with backoff",
                         self.what, exc)
        self.failures += 1
        return random.uniform(0, min(MAX_BACKOFF, 0.05 * 2 ** self.failures))

    def succeeded(self) -> None:
        if self.failures:
            logger.warning("Redis is back (%s) after %d failed tries", self.what, self.failures)
        self.failures = 0


class Worker:
    """Runs the tasks of one app from the given queues, in the order given."""

    def __init__(self, app: "Minitask", queues: List[str], *, concurrency: int = 1,
                 pool: str = "thread", burst: bool = False, grace: float = 30.0,
                 name: Optional[str] = None, prefetch: Optional[int] = None) -> None:
        if pool not in ("thread", "process"):
            raise ConfigurationError(f"pool must be 'thread' or 'process', got {pool!r}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if not queues:
            raise ConfigurationError("a worker needs at least one queue")
        for queue in queues:
            app.check_queue_name(queue)
        prefetch = app.prefetch if prefetch is None else check_prefetch(prefetch, "worker")
        self.app = app
        self.queues = list(queues)
        self.concurrency = concurrency
        self.pool = pool
        self.burst = burst
        self.grace = grace
        self.prefetch = prefetch
        self.name = name or f"{socket.gethostname()}.{os.getpid()}.{random.randrange(16**6):06x}"
        self.processed = 0
        self.failed = 0
        self.started_ms = app.clock.now_ms()
        self._lease_ms = to_ms(app.visibility_timeout)
        self._leases: Dict[str, Tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._closing = False
        self._stop = threading.Event()
        # Leases are renewed until every running task has ended or been given back,
        # which is after a stop: the grace is time a live worker still holds its tasks.
        self._beating = threading.Event()
        self._bell: Optional[_Bell] = None
        self._next_event_ms: Optional[int] = None
        self._on_start: Optional[Callable[[Job, Message], None]] = None
        self._on_end: Optional[Callable[[], None]] = None
        self._on_stopping: Optional[Callable[[Optional[Job]], None]] = None
        self._registers = True
        self._pipelined = False
        # Leased tasks not started yet (prefetch), in the order fetched.
        self._buffer: Deque[Job] = deque()
        # The job last taken from the buffer: a process pool child runs one at a time.
        self._running: Optional[Job] = None
        # Outcomes a child has not recorded yet (their tasks stay leased meanwhile).
        self._acks: List[Tuple[Job, Ack]] = []
        self._acks_since = 0.0
        # Wakes the heartbeat thread early: a stop, or outcomes waiting to be recorded.
        self._nudge = threading.Event()
        self._stop_reason = ""

    @property
    def broker(self) -> RedisBroker:
        return self.app.broker

    @property
    def heartbeat_period(self) -> float:
        """Seconds between lease renewals: a third of the visibility timeout, 0.1..5."""
        return max(0.1, min(self.app.visibility_timeout / 3.0, 5.0))

    # -- running -------------------------------------------------------------

    def run(self) -> None:
        """Serve the queues until stopped (SIGTERM, SIGINT, ``stop()``) or, in burst
        mode, until nothing is ready; running tasks get ``grace`` seconds to finish.

        Raises:
            BrokerError: Redis could not be reached at start.
        """
        if self.pool == "process":
            ProcessPool(self).run()
            return
        self.starting()
        self._bell = _Bell()
        restore = self._install_signals()
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="minitask-heartbeat",
                                     daemon=True)
        heartbeat.start()
        threads = ThreadPool[Job](self.concurrency, self.execute)
        try:
            self._dispatch(threads)
        finally:
            self._close(threads)
            self._request_stop()
            self._stop_beating()
            heartbeat.join(timeout=5)
            restore()
            self._silence()
            self.forget()

    def starting(self) -> None:
        """Announce this worker and make its queues known app-wide."""
        self.banner()
        self.broker.register_queues(self.queues)

    def serve_child(self, on_start: Callable[[Job, Message, Optional[float]], None],
                    on_end: Callable[[], None], on_done: Callable[[int, int], None],
                    on_stopping: Callable[[Optional[Job]], None]) -> None:
        """In a process pool child: serve tasks through a worker of this process's own.

        ``on_start`` hears of each attempt with its time limit, ``on_end`` that the
        attempt's function returned, ``on_done`` of the child's counters once its
        outcome is recorded, ``on_stopping`` (once a stop is asked) of the task
        still running.
        """
        child = Worker(self.app, self.queues, concurrency=1, pool="thread", burst=self.burst,
                       grace=self.grace, name=f"{self.name}.{os.getpid()}",
                       prefetch=self.prefetch)

        def started(job: Job, message: Message) -> None:
            on_start(job, message, self.app.tasks[message.task].options.timeout)

        child.run_child(started, on_end, lambda: on_done(child.processed, child.failed),
                        on_stopping)

    def run_child(self, on_start: Callable[[Job, Message], None], on_end: Callable[[], None],
                  on_done: Callable[[], None],
                  on_stopping: Callable[[Optional[Job]], None]) -> None:
        """Serve tasks one at a time in this process (a process pool child).

        ``on_start`` hears of each task before it runs, ``on_end`` when its function
        returns, ``on_done`` once its outcome is recorded; ``on_stopping`` hears,
        once a stop is asked, of the task still running.
        """
        self._on_start = on_start
        self._on_end = on_end
        self._on_stopping = on_stopping
        self._registers = False  # the supervisor speaks for its children
        self._pipelined = True
        self._bell = _Bell()
        restore = self._install_signals()
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="minitask-heartbeat",
                                     daemon=True)
        heartbeat.start()
        try:
            while not self._stop.is_set():
                if self.run_once():
                    with self._lock:
                        self._running = None
                    on_done()
                elif self.burst and not self._more_due_now():
                    break
                else:
                    self._wait_for_work()
        finally:
            # No task runs any more: end the heartbeat first, so that its own flush of
            # outcomes cannot race the final flush and the give-back below.
            self._request_stop()
            self._stop_beating()
            heartbeat.join(timeout=5)
            try:
                self._flush_acks(fetch=False)
            except BrokerError as exc:
                logger.error("could not record %d result(s) (%s); their tasks will be "
                             "delivered again when their lease expires", len(self._acks), exc)
            self._release_all()
            restore()
            self._silence()
            if self._stop_reason:
                logger.debug("child stopped on %s", self._stop_reason)

    def stop(self) -> None:
        """Ask the worker to stop fetching; running tasks finish within the grace."""
        self._request_stop()

    def _request_stop(self) -> None:
        self._stop.set()
        self._nudge.set()
        bell = self._bell
        if bell is not None:
            bell.ring()

    def _silence(self) -> None:
        bell, self._bell = self._bell, None
        if bell is not None:
            bell.close()

    def _stop_beating(self) -> None:
        """Once no task is held any more: end the heartbeat thread."""
        self._beating.set()
        self._nudge.set()

    def run_once(self) -> bool:
        """Fetch at most one task and run it in this thread; True if one ran."""
        job = self._guarded(self.fetch, "fetch tasks")
        if job is None:
            return False
        self.execute(job)
        return True

    def _dispatch(self, threads: ThreadPool[Job]) -> None:
        while not self._stop.is_set():
            if not threads.wait_for_slot(self._stop):
                break
            finished = threads.finished
            job = self._guarded(self.fetch, "fetch tasks")
            if job is not None:
                threads.submit(job)
                continue
            threads.give_back_slot()
            if self.burst:
                # A task that ended after the fetch may have scheduled more (a retry
                # due now): once all are done, look again unless none ended meanwhile.
                threads.wait_idle()
                if threads.finished != finished or self._more_due_now():
                    continue
                break
            self._wait_for_work()

    def _more_due_now(self) -> bool:
        """The last fetch left work that is due already (it stops after a batch)."""
        return self._next_event_ms is not None and self._next_event_ms <= self.app.clock.now_ms()

    def _guarded(self, step: Callable[[], Any], what: str) -> Any:
        """Run a Redis step, riding out outages with backoff instead of crashing."""
        backoff = Backoff(what)
        while True:
            try:
                result = step()
            except BrokerError as exc:
                pause = backoff.failed(exc)
                if self._stop.wait(pause):
                    return None
                continue
            backoff.succeeded()
            return result

    def _wait_for_work(self) -> None:
        """Block on Redis until a task may be ready, a delayed one is due, or a stop."""
        timeout = 5.0
        if self._next_event_ms is not None:
            timeout = max(0.0, self._seconds_until(self._next_event_ms))
        if self._stop.is_set():
            return
        self._guarded(lambda: self._blocking_wait(timeout), "wait for tasks")

    def _blocking_wait(self, timeout: float) -> None:
        """Wait, and lease from the first queue as it ends (on the app's real clock:
        the fetch reads the server's); a stop rings the bell to end it at once."""
        bell = self._bell
        terms = None
        if isinstance(self.app.clock, SystemClock):
            terms = FetchTerms(self._lease_ms, self.prefetch, self.app.max_deliveries)
        result = self.broker.wait(self.queues, timeout, then_fetch=terms,
                                  interrupt=None if bell is None else bell.fileno())
        if result is not None:
            self._take(self.queues[0], result)

    def _seconds_until(self, due_ms: int) -> float:
        """Seconds until the app's clock reads ``due_ms``.

        The real clock is read to the microsecond (plus a hair, so the wait never
        ends just short of the due millisecond): counting from a whole-ms reading
        would wake up to 1 ms late. Other clocks tick in whole ms: one more is waited.
        """
        if isinstance(self.app.clock, SystemClock):
            return due_ms / 1000.0 - time.time() + 0.00005
        return (due_ms + 1 - int(self.app.clock.now_ms())) / 1000.0

    # -- one task ------------------------------------------------------------

    def fetch(self) -> Optional[Job]:
        """Lease the best ready tasks, trying the queues in order; hand out the first.

        Up to ``prefetch`` tasks are leased per round trip; the rest wait in this
        worker's buffer, their leases renewed by the heartbeat.
        """
        job = self._next_buffered()
        if job is not None or self._closing or self._stop.is_set():
            return job
        now_ms = self.app.clock.now_ms()
        next_event: Optional[int] = None
        for queue in self.queues:
            result = self.broker.fetch(queue, now_ms=now_ms, lease_ms=self._lease_ms,
                                       count=self.prefetch,
                                       max_deliveries=self.app.max_deliveries)
            self._take(queue, result)
            job = self._next_buffered()
            if job is not None:
                return job
            if result.next_event_ms is not None:
                next_event = min(result.next_event_ms, next_event or result.next_event_ms)
        self._next_event_ms = next_event
        return None

    def _next_buffered(self) -> Optional[Job]:
        with self._lock:
            if not self._buffer or self._closing or self._stop.is_set():
                return None
            job = self._running = self._buffer.popleft()
        return job

    def _take(self, queue: str, result: FetchResult) -> None:
        """Hold what a fetch leased, unless the worker is closing; bury the poisoned.

        What was leased is held first: a failure while burying must not leave a
        fresh batch leased to nobody. A poisoned task that could not be buried
        stays leased and expired, and the next fetch reports it again.
        """
        jobs = [Job(queue, delivery) for delivery in result.deliveries]
        with self._lock:
            closing = self._closing
            if not closing:
                for job in jobs:
                    self._leases[job.task_id] = (queue, job.delivery.priority)
                self._buffer.extend(jobs)
        if jobs and closing:
            self._give_back([_lease_of(job) for job in jobs])
        elif jobs:
            self.broker.stop_waiting()
        for task_id in result.poisoned:
            try:
                self._bury_poisoned(queue, task_id)
            except BrokerError as exc:
                logger.error("could not dead-letter task %s (%s); the next fetch tries again",
                             task_id, exc)

    def execute(self, job: Job) -> None:
        """Run one leased task and record its outcome; never raises for a task's error."""
        try:
            message = job.delivery.message()
        except DecodeError as exc:
            self._bury(job, None, exc, "the message cannot be decoded")
            return
        task = self.app.tasks.get(message.task)
        if task is None:
            self._bury(job, message, UnknownTaskError(
                f"no task named {message.task!r} is registered in app {self.app.name!r} on "
                f"this worker"), "unknown task")
            return
        if self._on_start is not None:
            if task.options.timeout is not None:
                # this attempt may be killed with its process: record what is done, and
                # give back what has not started, so neither waits for a lease to expire
                if self._acks:
                    self._record_acks(fetch=False)
                self._give_back_buffer()
            self._on_start(job, message)
        started = time.monotonic()
        value: Any = None
        error: Optional[BaseException] = None
        with running(message, job.delivery.delivery):
            try:
                value = task.func(*message.args, **message.kwargs)
            except (Exception, SystemExit) as exc:
                error = exc
        if self._on_end is not None:
            self._on_end()  # no longer at risk of a kill: recording may wait for Redis
        duration = time.monotonic() - started
        limit = task.options.timeout
        if error is None and limit is not None and duration > limit:
            error = TimeLimitExceeded(f"task {task.name!r} ran {duration:.3f} s, over its "
                                      f"timeout of {limit} s")
        self.finish(job, message, value, error, duration)

    def finish(self, job: Job, message: Message, value: Any, error: Optional[BaseException],
               duration: float) -> None:
        """Record an attempt's outcome: ack, retry or dead letter."""
        now_ms = self.app.clock.now_ms()
        task = self.app.tasks[message.task]
        options = task.options
        if error is None:
            outcome = Outcome("succeeded", now_ms, value=value, attempt=message.attempt)
            ttl_ms = 0 if options.ignore_result else to_ms(options.result_ttl)
            try:
                ack = self.broker.prepare_ack(job.queue, job.task_id, outcome, ttl_ms,
                                              task_name=task.name)
            except EncodeError as exc:
                self._bury(job, message, exc, "the return value cannot be encoded")
                return
            if self._pipelined:
                self._defer_ack(job, ack)
            else:
                self._record(lambda: self.broker.ack_many([ack])[0], job, "record a result")
            self.processed += 1
            logger.info("task %s %s succeeded in %.3f s", message.id, task.name, duration)
            return
        retryable = isinstance(error, Retry) or isinstance(error, options.retry_on)
        if retryable and message.attempt <= options.retries:
            delay = error.delay if isinstance(error, Retry) else None
            if delay is None:
                cap = min(options.retry_backoff_max,
                          options.retry_backoff * 2 ** (message.attempt - 1))
                delay = random.uniform(0, cap)
            note = _failure(error, "retrying", now_ms, message.attempt, "")
            following = dataclasses.replace(message, attempt=message.attempt + 1)
            due_ms = now_ms + to_ms(delay)
            self._record(lambda: self.broker.retry(job.queue, following, due_ms, note),
                         job, "schedule a retry")
            self.failed += 1
            logger.info("task %s %s failed (%s: %s) in %.3f s; retry %d in %.3f s",
                        message.id, task.name, type(error).__name__, error, duration,
                        message.attempt, delay)
            return
        reason = "out of attempts" if retryable else "failed"
        self._bury(job, message, error, reason)
        logger.info("task %s %s failed (%s: %s) in %.3f s", message.id, task.name,
                    type(error).__name__, error, duration)

    def _defer_ack(self, job: Job, ack: Ack) -> None:
        """A child records outcomes in batches: while its buffer holds more tasks, for
        up to ``ACK_WINDOW``; when the buffer runs dry, with its next fetch.
        """
        with self._lock:
            if not self._acks:
                self._acks_since = time.monotonic()
            self._acks.append((job, ack))
            first = len(self._acks) == 1
            more = bool(self._buffer) and not self._closing
        if more and time.monotonic() - self._acks_since < ACK_WINDOW:
            if first:
                self._nudge.set()  # the heartbeat records them if the next task runs long
            return
        self._record_acks(fetch=not more and not self._stop.is_set())

    def _record_acks(self, fetch: bool) -> None:
        """Record the waiting outcomes, retrying through outages: they must not be lost."""
        _persist(lambda: self._flush_acks(fetch), "record results")

    def _flush_acks(self, fetch: bool) -> None:
        """Record the waiting outcomes in one round trip; with ``fetch``, lease the next
        tasks of the first queue in the same round trip."""
        with self._lock:
            acks, self._acks = self._acks, []
        if not acks and not fetch:
            return
        entries = [ack for _, ack in acks]
        first = self.queues[0]
        result: Optional[FetchResult] = None
        try:
            if fetch:
                held, result = self.broker.ack_and_fetch(
                    entries, first, now_ms=self.app.clock.now_ms(), lease_ms=self._lease_ms,
                    count=self.prefetch, max_deliveries=self.app.max_deliveries)
            else:
                held = self.broker.ack_many(entries)
        except BrokerError:
            with self._lock:
                self._acks[:0] = acks  # still leased: recorded by the next try
            raise
        with self._lock:
            for job, _ in acks:
                self._leases.pop(job.task_id, None)
        for (job, _), still_held in zip(acks, held):
            if not still_held:
                _warn_lost_lease(job)
        if result is not None:
            self._take(first, result)

    def _bury(self, job: Job, message: Optional[Message], error: BaseException,
              reason: str) -> None:
        outcome = _failure(error, "failed", self.app.clock.now_ms(),
                           message.attempt if message else 0, reason)
        if message is None or message.task not in self.app.tasks:
            logger.error("dead-lettered task %s from queue %r: %s: %s", job.delivery.task_id,
                         job.queue, reason, error)
        self._record(lambda: self.broker.bury(
            job.queue, job.delivery.task_id, outcome=outcome,
            result_ttl_ms=to_ms(self.app.result_ttl)), job, "dead-letter a task")
        self.failed += 1

    def _bury_poisoned(self, queue: str, task_id: str) -> None:
        error = RuntimeError(f"the worker died while running it {self.app.max_deliveries} "
                             f"times (max_deliveries={self.app.max_deliveries})")
        outcome = Outcome("failed", self.app.clock.now_ms(), exc_type="WorkerLost",
                          message=str(error), reason="worker lost")
        self.broker.bury(queue, task_id, outcome=outcome,
                         result_ttl_ms=to_ms(self.app.result_ttl))
        logger.error("dead-lettered task %s from queue %r: %s", task_id, queue, error)

    def _record(self, step: Callable[[], Any], job: Job, what: str) -> None:
        """Write an outcome, retrying through outages: it must not be lost."""
        held = _persist(step, what)
        with self._lock:
            self._leases.pop(job.delivery.task_id, None)
        if held is False:
            _warn_lost_lease(job)

    # -- leases, heartbeat, stop ---------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Renew leases until the worker holds none; record outcomes a child let wait.

        It goes on through a stop: a task let finish within the grace is still
        this live worker's, and its lease must not lapse meanwhile.
        """
        period = self.heartbeat_period
        backoff = Backoff("renew leases")
        next_beat = time.monotonic() + period
        stopping = False
        while not self._beating.is_set():
            wake = next_beat
            with self._lock:
                if self._acks:
                    wake = min(wake, self._acks_since + ACK_WINDOW)
            self._nudge.wait(max(0.0, wake - time.monotonic()))
            self._nudge.clear()
            if self._beating.is_set():
                break
            if self._stop.is_set() and not stopping:
                stopping = True
                self._stopping()
            try:
                with self._lock:
                    overdue = bool(self._acks) and (
                        time.monotonic() - self._acks_since >= ACK_WINDOW)
                if overdue:
                    self._flush_acks(fetch=False)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + period
                    self.beat()
            except BrokerError as exc:
                self._beating.wait(backoff.failed(exc))  # no busy loop while Redis is away
            else:
                backoff.succeeded()

    def _stopping(self) -> None:
        """Once a stop is asked: give back the buffer now, not after the running task."""
        with self._lock:
            self._closing = True
            running = self._running
        self._give_back_buffer()
        if self._on_stopping is not None:
            self._on_stopping(running)

    def _give_back_buffer(self) -> None:
        """Return the prefetched tasks not started yet, uncounted, to their queues."""
        with self._lock:
            waiting = list(self._buffer)
            self._buffer.clear()
            for job in waiting:
                self._leases.pop(job.task_id, None)
        if waiting:
            self._give_back([_lease_of(job) for job in waiting])

    def _give_back(self, held: List[Tuple[str, Tuple[str, int]]]) -> None:
        """Release (task id, (queue, priority)) leases, as ``_leases`` holds them."""
        for queue, leases in _by_queue(held).items():
            try:
                count = self.broker.release(queue, leases)
                logger.info("gave back %d unfinished task(s) to queue %r", count, queue)
            except BrokerError as exc:
                logger.error("could not give back tasks to queue %r (%s); they will be "
                             "delivered again when their lease expires", queue, exc)

    def beat(self) -> None:
        """Renew the leases of running tasks and say this worker is alive."""
        now_ms = self.app.clock.now_ms()
        with self._lock:
            held = list(self._leases.items())
        for queue, leases in _by_queue(held).items():
            self.broker.renew(queue, leases, now_ms + self._lease_ms)
        if not self._registers:
            return
        period_ms = to_ms(self.heartbeat_period)
        self.broker.heartbeat(self.name, {
            "pid": os.getpid(), "host": socket.gethostname(), "queues": ",".join(self.queues),
            "pool": self.pool, "concurrency": self.concurrency, "started_ms": self.started_ms,
            "processed": self.processed, "failed": self.failed, "running": len(held),
            "beat_ms": now_ms,
        }, now_ms, ttl_ms=period_ms * 4)

    def _close(self, threads: ThreadPool[Job]) -> None:
        """Stop taking tasks, give running ones the grace, give back the rest."""
        with self._lock:
            self._closing = True
        if self._stop_reason:
            logger.info("%s received: stopping (grace %s s)", self._stop_reason, self.grace)
        if not threads.wait_idle(self.grace):
            logger.warning("grace of %s s is over; giving back tasks still running", self.grace)
        self._release_all()

    def _release_all(self) -> None:
        """Give back every lease held, except those of outcomes waiting to be recorded."""
        with self._lock:
            self._closing = True
            self._buffer.clear()
            finished = {job.task_id for job, _ in self._acks}
            held = [lease for lease in self._leases.items() if lease[0] not in finished]
            for task_id, _ in held:
                del self._leases[task_id]
        if held:
            self._give_back(held)

    def timed_out(self, job: Job, message: Message, elapsed: float) -> None:
        """The process pool killed the attempt at its time limit: record the failure."""
        task = self.app.tasks[message.task]
        logger.error("task %s %s ran past its timeout of %s s: killed its process",
                     job.task_id, task.name, task.options.timeout)
        self.finish(job, message, None, TimeLimitExceeded(
            f"task {task.name!r} ran past its timeout of {task.options.timeout} s and was "
            f"killed"), elapsed)

    def give_back(self, job: Job) -> None:
        """Return a leased task to the head of its queue without counting a delivery;
        if Redis fails, that is logged and the task comes back when its lease expires."""
        self._give_back([_lease_of(job)])

    def forget(self) -> None:
        try:
            self.broker.forget_worker(self.name)
        except BrokerError as exc:
            logger.warning("could not unregister worker %s: %s", self.name, exc)

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        interrupts = [0]

        def on_signal(signum: int, frame: Optional[FrameType]) -> None:
            if signum == signal.SIGINT:
                interrupts[0] += 1
                if interrupts[0] > 1:
                    logger.warning("second interrupt: exiting at once")
                    os._exit(130)
            # Only flags here: logging from a handler can re-enter a half-written record.
            if not self._stop.is_set():
                self._stop_reason = signal.Signals(signum).name
            self._request_stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return restore

    def banner(self) -> None:
        tasks = sorted(self.app.tasks)
        logger.info("minitask worker %s: app %r, broker %s, queues %s, pool %s x%d, %d "
                    "task(s): %s", self.name, self.app.name, self.broker.description,
                    ",".join(self.queues), self.pool, self.concurrency, len(tasks),
                    ", ".join(tasks) or "(none)")
        if self.pool == "thread":
            limited = [t.name for t in self.app.tasks.values() if t.options.timeout is not None]
            if limited:
                logger.warning("the thread pool cannot stop a running task: the timeout of %s "
                               "is checked when the attempt returns (use --pool process to "
                               "kill attempts at their limit)", ", ".join(limited))


def _failure(error: BaseException, status: str, now_ms: int, attempt: int,
             reason: str) -> Outcome:
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return Outcome(status, now_ms, exc_type=type(error).__name__, message=str(error),
                   traceback=trace, reason=reason, attempt=attempt)


def _by_queue(held: List[Tuple[str, Tuple[str, int]]]) -> Dict[str, List[Tuple[str, int]]]:
    """(task id, (queue, priority)) leases as (task id, priority) lists per queue."""
    by_queue: Dict[str, List[Tuple[str, int]]] = {}
    for task_id, (queue, priority) in held:
        by_queue.setdefault(queue, []).append((task_id, priority))
    return by_queue


def _lease_of(job: Job) -> Tuple[str, Tuple[str, int]]:
    return job.task_id, (job.queue, job.delivery.priority)


def _persist(step: Callable[[], Any], what: str) -> Any:
    """Run a step that writes an outcome until it succeeds, backing off while Redis is
    away; unlike ``Worker._guarded``, a stop does not end it."""
    backoff = Backoff(what)
    while True:
        try:
            result = step()
        except BrokerError as exc:
            time.sleep(backoff.failed(exc))
            continue
        backoff.succeeded()
        return result


def _warn_lost_lease(job: Job) -> None:
    logger.warning("task %s: its lease had expired and it may have been delivered again; "
                   "raise visibility_timeout if tasks stall this long", job.task_id)
