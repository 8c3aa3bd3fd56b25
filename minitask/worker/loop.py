"""Worker: the loop that composes the parts, each with one job.

Work comes from a source (``sources``), runs in a pool (``runner`` is what a
pool calls), its outcome is recorded (``outcomes``), its lease is kept alive
meanwhile (``leases``), and a stop ends it all in order (``stop``). The loop
only asks for a job, hands it to the pool, and waits when there is none.
"""
from __future__ import annotations

import logging
import os
import random
import socket
from typing import Any, Callable, List, Optional, Sequence

from ..broker import Broker
from ..errors import BrokerError, ConfigurationError
from ..message import Message, Outcome, to_ms
from ..periodic import Schedule
from ..pool import ProcessPool, ThreadPool
from .host import Host
from .leases import Heartbeat, Holdings, Job, Leases, lease_of
from .outages import guarded
from .outcomes import Recorder
from .runner import Runner
from .sources import QueueSource, Source
from .stop import Shutdown, Stop
from .ticks import TickSource

logger = logging.getLogger(__name__)

#: Most tasks a worker leases in one fetch (also bounds one batched ack).
MAX_PREFETCH = 1000


def check_prefetch(value: Any, owner: str) -> int:
    """``value`` if it is a valid prefetch; ``owner`` names the app or worker in the error."""
    if not isinstance(value, int) or not 1 <= value <= MAX_PREFETCH:
        raise ConfigurationError(f"{owner}: prefetch must be an int from 1 to {MAX_PREFETCH}, "
                                 f"got {value!r}")
    return value


class Worker:
    """Runs the tasks of one app from the given queues, in the order given."""

    def __init__(self, app: Host, queues: List[str], *, concurrency: int = 1,
                 pool: str = "thread", burst: bool = False, grace: float = 30.0,
                 name: Optional[str] = None, prefetch: Optional[int] = None,
                 schedules: Sequence[Schedule] = ()) -> None:
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
        # Whether this worker says it is alive: a process pool's supervisor speaks
        # for its children.
        self._registers = True
        self._holdings = Holdings()
        self._heartbeat = Heartbeat()
        self._stop = Stop(wakers=[self._heartbeat.nudge])
        self._leases = Leases(app, self._holdings, to_ms(app.visibility_timeout))
        self._shutdown = Shutdown(self._holdings, self._leases, self._stop)
        self._queues = QueueSource(app, self.queues, prefetch, self._holdings, self._leases,
                                   self._stop)
        # Where the loop takes work from: the ticks of the queues' schedules, in front of
        # the queues. Another kind of work comes in as another Source, not a new branch.
        # ``schedules`` are the app's decorated ones, written when the worker starts.
        self._ticks = TickSource(app, self._queues, self._holdings, self._stop, schedules)
        self._source: Source = self._ticks
        # A child records outcomes with its next fetch from the queues in one round trip.
        self._outcomes = Recorder(app, self._holdings, self._queues, self._stop.event,
                                  wake=self._heartbeat.nudge, listeners=[self._count])
        self._runner = Runner(app, self._outcomes, self._leases)

    @property
    def broker(self) -> Broker:
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
        self._stop.open_bell()
        restore = self._stop.install_signals()
        self._start_heartbeat()
        threads = ThreadPool[Job](self.concurrency, self.execute)
        try:
            self._dispatch(threads)
        finally:
            self._shutdown.close(threads, self.grace)
            self._stop.request()
            self._heartbeat.end()
            restore()
            self._stop.silence()
            self.forget()

    def starting(self) -> None:
        """Announce this worker and make its queues known app-wide."""
        self.banner()
        self.broker.queues.register_queues(self.queues)
        self._ticks.publish()

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
        self._runner.on_start = on_start
        self._runner.on_end = on_end
        self._shutdown.on_stopping = on_stopping
        self._registers = False  # the supervisor speaks for its children
        self._outcomes.batched = True
        self._stop.open_bell()
        restore = self._stop.install_signals()
        self._start_heartbeat()
        try:
            while not self._stop.is_set():
                if self.run_once():
                    self._holdings.clear_running()
                    on_done()
                elif self.burst and not self._source.more_due_now():
                    break
                else:
                    self._source.wait()
        finally:
            # No task runs any more: end the heartbeat first, so that its own flush of
            # outcomes cannot race the final flush and the give-back below.
            self._stop.request()
            self._heartbeat.end()
            try:
                self._outcomes.flush(fetch=False)
            except BrokerError as exc:
                logger.error("could not record %d result(s) (%s); their tasks will be "
                             "delivered again when their lease expires",
                             self._outcomes.waiting(), exc)
            self._leases.release_all()
            restore()
            self._stop.silence()
            if self._stop.reason:
                logger.debug("child stopped on %s", self._stop.reason)

    def stop(self) -> None:
        """Ask the worker to stop fetching; running tasks finish within the grace."""
        self._stop.request()

    def run_once(self) -> bool:
        """Fetch at most one task and run it in this thread; True if one ran."""
        job = guarded(self.fetch, "fetch tasks", self._stop.event)
        if job is None:
            return False
        self.execute(job)
        return True

    def _dispatch(self, threads: ThreadPool[Job]) -> None:
        while not self._stop.is_set():
            if not threads.wait_for_slot(self._stop.event):
                break
            finished = threads.finished
            job = guarded(self.fetch, "fetch tasks", self._stop.event)
            if job is not None:
                threads.submit(job)
                continue
            threads.give_back_slot()
            if self.burst:
                # A task that ended after the fetch may have scheduled more (a retry
                # due now): once all are done, look again unless none ended meanwhile.
                threads.wait_idle()
                if threads.finished != finished or self._source.more_due_now():
                    continue
                break
            self._source.wait()

    def _start_heartbeat(self) -> None:
        self._heartbeat.start(self.heartbeat_period, self.beat, self._outcomes,
                              self._stop.event, self._shutdown.stopping)

    # -- one task ------------------------------------------------------------

    def fetch(self) -> Optional[Job]:
        """Lease the best ready tasks, trying the queues in order; hand out the first.

        Up to ``prefetch`` tasks are leased per round trip; the rest wait in this
        worker's buffer, their leases renewed by the heartbeat.
        """
        return self._source.next_job()

    def execute(self, job: Job) -> None:
        """Run one leased task and record its outcome; never raises for a task's error."""
        self._runner.execute(job)

    def timed_out(self, job: Job, message: Message, elapsed: float) -> None:
        """The process pool killed the attempt at its time limit: record the failure."""
        self._runner.timed_out(job, message, elapsed)

    def give_back(self, job: Job) -> None:
        """Return a leased task to the head of its queue without counting a delivery;
        if Redis fails, that is logged and the task comes back when its lease expires."""
        self._leases.give_back([lease_of(job)])

    def _count(self, job: Job, outcome: Outcome) -> None:
        if outcome.status == "succeeded":
            self.processed += 1
        else:
            self.failed += 1

    # -- presence ------------------------------------------------------------

    def beat(self) -> None:
        """Renew the leases of running tasks and say this worker is alive."""
        now_ms = self.app.clock.now_ms()
        running = self._leases.renew(now_ms)
        if not self._registers:
            return
        period_ms = to_ms(self.heartbeat_period)
        self.broker.registry.heartbeat(self.name, {
            "pid": os.getpid(), "host": socket.gethostname(), "queues": ",".join(self.queues),
            "pool": self.pool, "concurrency": self.concurrency, "started_ms": self.started_ms,
            "processed": self.processed, "failed": self.failed, "running": running,
            "beat_ms": now_ms,
        }, now_ms, ttl_ms=period_ms * 4)

    def forget(self) -> None:
        try:
            self.broker.registry.forget(self.name)
        except BrokerError as exc:
            logger.warning("could not unregister worker %s: %s", self.name, exc)

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
