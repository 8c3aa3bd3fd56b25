"""Worker: the loop that composes the parts, each with one job.

Work comes from a source (``sources``), runs in a pool (``runner`` is what a
pool calls), its outcome is recorded (``outcomes``), its lease is kept alive
meanwhile (``leases``), and a stop ends it all in order (``stop``). The loop
only asks for a job, hands it to the pool, and waits when there is none; a
process pool's child runs a loop of its own (``child_loop``).
"""
from __future__ import annotations

import os
import random
import socket
import threading
from typing import Any, Callable, ContextManager, Dict, List, Optional, Protocol, Sequence, Set

from ..broker.health import bulk_limit, connected_replicas, replica_warning
from ..broker.keys import MAX_NAME
from ..errors import BrokerError, ConfigurationError, MinitaskError
from ..periodic import Schedule
from ..printable import own_logger
from ..stores.broker import Broker
from ..wire.message import Message, Outcome, to_ms
from .acl_start import require_worker_acl
from .acl_steps import check_queue_keys
from .banner import log_banner, log_stopped
from .broadcasts import BroadcastSource, check_subscriber, default_subscriber
from .cancels import CancelWatch
from .child_loop import serve
from .control import Orders, register
from .host import Host
from .heartbeat import Heartbeat
from .leases import Holdings, Job, Lease, Leases, lease_of
from .loop_acks import LoopAcks
from .outages import (beat_step, guarded, ride_outages_quietly, share_outages, through_busy,
                      unconfirmed_at_start)
from .outcomes import Recorder
from .pools.coroutines import AsyncioPool, confirming
from .pools.processes import ProcessPool
from .pools.recycling import recycling_of
from .pools.threads import ThreadPool
from .redis_time import RedisTime, refresh_clock, start_clock
from .runner import Runner
from .sources import MAX_PREFETCH as MAX_PREFETCH  # (the worker package names it)
from .sources import QueueSource, Source
from .stop import Shutdown, Stop
from .ticks import TickSource

logger = own_logger(__name__)

#: Most attempts one worker runs at once, per pool: past these a process pool
#: forks more children than any machine has cores for, a thread pool runs out of
#: threads, and an event loop spends its time switching.
MAX_CONCURRENCY = {"process": 256, "thread": 1000, "asyncio": 10_000}
CONCURRENCY_WHY = "for more, start more workers (on more machines)"
POOLS = ("thread", "process", "asyncio")  # the pools a worker can run its tasks in


class Slots(Protocol):
    """What the dispatcher asks of a pool that runs jobs in this process."""

    @property
    def finished(self) -> int: ...

    def wait_for_slot(self, stop: Any) -> bool: ...

    def give_back_slot(self, finished: bool = False) -> None: ...

    def submit(self, job: Job) -> None: ...

    def wait_idle(self, timeout: Optional[float] = None) -> bool: ...


def check_prefetch(value: Any, owner: str) -> int:
    """``value`` if it is a valid prefetch; ``owner`` names the app or worker in the error."""
    if not isinstance(value, int) or not 1 <= value <= MAX_PREFETCH:
        raise ConfigurationError(f"{owner}: prefetch must be an int from 1 to {MAX_PREFETCH}, "
                                 f"got {value!r}")
    return value


def shown_name(name: Optional[str]) -> Optional[str]:
    """``name`` if a worker can be called by it, else ConfigurationError saying why."""
    if name is not None and not isinstance(name, str):
        raise ConfigurationError(f"worker name must be a str, got {name!r}")
    if name and (len(name) > MAX_NAME or not name.isprintable()):
        raise ConfigurationError(
            f"worker name {name[:40]!r} must be printable text (no control or format "
            f"characters) of at most {MAX_NAME} characters; it has {len(name)}")
    return name


class Worker:
    """Runs the tasks of one app from the given queues, in the order given."""

    #: The ids of the tasks a process pool's children run (its supervisor sets them).
    running_ids: Optional[List[str]] = None
    #: The asyncio pool's coroutines left running past their cancel (``pools.overruns``).
    overruns: Any = None

    def __init__(self, app: Host, queues: List[str], *, concurrency: int = 1,
                 pool: str = "thread", burst: bool = False, grace: float = 30.0,
                 name: Optional[str] = None, prefetch: Optional[int] = None,
                 schedules: Sequence[Schedule] = (), subscriber: Optional[str] = None,
                 max_tasks_per_child: Optional[int] = None,
                 max_memory_per_child: Optional[int] = None) -> None:
        if pool not in POOLS:
            raise ConfigurationError(f"pool must be 'thread', 'process' or 'asyncio', got {pool!r}")
        if (not isinstance(grace, (int, float)) or isinstance(grace, bool)
                or not 0 <= grace < float("inf")):
            raise ConfigurationError(f"grace must be a finite number of seconds >= 0, "
                                     f"got {grace!r}")
        most = MAX_CONCURRENCY.get(pool, 1)
        if type(concurrency) is not int or not 1 <= concurrency <= most:
            raise ConfigurationError(f"concurrency of a {pool} pool must be an int from 1 to "
                                     f"{most}, got {concurrency!r}; {CONCURRENCY_WHY}")
        if not queues:
            raise ConfigurationError("a worker needs at least one queue")
        for queue in queues:
            app.check_queue_name(queue)
        prefetch = app.prefetch if prefetch is None else check_prefetch(prefetch, "worker")
        #: When a process pool replaces its children (None: never, but when they die).
        self.recycling = recycling_of(pool, max_tasks_per_child, max_memory_per_child)
        app.hooks.check_pool(pool)
        self.hooks = app.hooks  # the app's: the worker hooks are called with this worker
        self.app = app
        self.queues = list(queues)
        self.concurrency = concurrency
        self.pool = pool
        self.burst = burst
        self.grace = grace
        self.prefetch = prefetch
        # id: unique, keys its record and orders; name (--name, else the id): may be shared,
        # only shown, never in a key: printable text up to MAX_NAME characters (cli/worker.py)
        self.id = f"{socket.gethostname()}.{os.getpid()}.{random.randrange(16**6):06x}"
        self.name = shown_name(name) or self.id
        self.processed = self.failed = self.recycled = 0  # recycled: children replaced
        #: How far this worker's clock is ahead of Redis's (ms), measured as it starts
        #: and again since (``redis_time``): the app's clock reads Redis's time.
        self.clock_skew_ms: Optional[int] = None
        self.redis_time = RedisTime()
        self.started_ms = app.clock.now_ms()
        self._registers = True  # says it is alive (a process pool's children: not)
        #: heartbeat refusals logged already (a key of another type may stay for long)
        self._beat_refusals: Set[str] = set()
        self._holdings = Holdings()
        self._fetching = threading.Lock()
        self._heartbeat = Heartbeat()
        self._stop = Stop(wakers=[self._heartbeat.nudge])
        self._leases = Leases(app, self._holdings, to_ms(app.visibility_timeout),
                              self.heartbeat_period)
        self._shutdown = Shutdown(self._holdings, self._leases, self._stop)
        self._queues = QueueSource(app, self.queues, prefetch, self._holdings, self._leases,
                                   self._stop)
        # Where the loop takes work from: the schedules' ticks, then the queues (another kind
        # of work comes as another Source); ``schedules``: the decorated ones, written at start.
        self._ticks = TickSource(app, self._queues, self._holdings, self._stop, schedules)
        self.schedules = list(schedules)  # (a process pool's children mend them too)
        # In front of them all, the broadcast calls of the queues, as ``subscriber``.
        self.subscriber = (default_subscriber() if subscriber is None
                           else check_subscriber(subscriber))
        self._broadcasts = BroadcastSource(app, self._ticks, self._queues, self._holdings,
                                           self._leases, self._stop, self.subscriber)
        self._source: Source = self._broadcasts
        # A child records outcomes with its next fetch from the queues in one round trip.
        self._outcomes = Recorder(app, self._holdings, self._queues, self._stop.event,
                                  wake=self._heartbeat.nudge, listeners=[self._count])
        self._outcomes.worker_name = self.name
        self._runner = Runner(app, self._outcomes, self._leases)
        self._queues.on_poisoned = self._runner.observer.buried
        self._queues.trims = self._outcomes.trims
        # ``minitask shutdown`` reaches the worker here: a process pool's supervisor
        # stops its pool instead (set by ``run``).
        self._orders: Optional[Orders] = None
        self._on_shutdown: Callable[[str], None] = self._remote_stop
        # Hears cancel(running=True) requests for the attempts of this process.
        self._cancel_watch = CancelWatch(app, self.queues, self._runner.cancels,
                                         self._holdings, self._stop.event)

    @property
    def broker(self) -> Broker:
        return self.app.broker

    @property
    def heartbeat_period(self) -> float:
        """Seconds between lease renewals: a third of the visibility timeout, 0.1..5."""
        return max(0.1, min(self.app.visibility_timeout / 3.0, 5.0))

    # -- running -------------------------------------------------------------

    def run(self) -> None:
        """Serve the queues until stopped, or in burst mode until none is ready.

        It stops on SIGTERM, SIGINT or ``stop()``; running tasks then get
        ``grace`` seconds to finish.

        Raises:
            BrokerError: Redis could not be reached at start.
            ConfigurationError: at start, before anything is leased, the Redis ACL user
                may not run a command the worker needs (Redis 7.0 and later; named).
        """
        how = "nothing left to do (burst)" if self.burst else "stop()"
        try:
            self._run()
        except BaseException as exc:
            how = f"by {type(exc).__name__}: {exc}"
            raise
        finally:
            log_stopped(self, self._stop.reason or how)

    def _run(self) -> None:
        if self.pool == "process":
            pool = ProcessPool(self)
            self._on_shutdown = pool.stop
            pool.run()
            self._stop.reason = self._stop.reason or pool.why
            return
        # signals first: a SIGTERM sent as soon as the worker is listed (starting) is a
        # graceful stop, not the default handler's kill
        self._stop.open_bell()
        restore = self._stop.install_signals()
        try:
            self.starting()
            self.listen_for_orders()
        except BaseException:
            restore()
            self._stop.silence()
            raise
        self._heartbeat.start(self.heartbeat_period, self.beat, self._outcomes,
                              self._stop.event, self._shutdown.stopping)
        self._cancel_watch.start()
        slots: Optional[Slots] = None
        aio: Optional[AsyncioPool] = None
        on_grace_over: Optional[Callable[[], None]] = None
        self._outcomes.batched = True  # an outcome's round trip leases the next task
        try:
            if self.pool == "asyncio":
                quick = LoopAcks(self.app, self._outcomes, self._holdings, self._queues,
                                 self._ticks, self._broadcasts, self._runner.observer.progress,
                                 self._stop.event)
                slots = aio = AsyncioPool(self.concurrency, self._runner, self._outcomes,
                                          self.hooks, on_free=self._queues.lease_up_to,
                                          follow_on=self.follow_on, quick=quick,
                                          give_back=self._leases.give_back_held)
                on_grace_over, self.overruns = aio.cancel_running, aio.overruns
                failed = aio.on_loop(self.hooks.ainit(self))
            else:
                slots = threads = ThreadPool[Job](self.concurrency, self._runner.execute,
                                                  lambda: self.hooks.init(self), self.follow_on)
                failed = (threads.init_failures[-1] if len(threads.init_failures) ==
                          self.concurrency else None)
            if failed is not None:
                raise MinitaskError(f"the {self.pool} pool cannot serve: {failed}")
            self.hooks.call("worker_ready", self)
            self._dispatch(slots)
        finally:
            if slots is not None:
                self._shutdown.close(slots, self.grace, on_grace_over)
            self._stop.request()
            self._heartbeat.end()
            self._outcomes.flush_last()
            if aio is not None:
                aio.close()
            self._cancel_watch.end()
            restore()
            self._stop.silence()
            self.forget()
            self.hooks.call("worker_shutdown", self)

    def starting(self, stop: Optional[threading.Event] = None) -> None:
        """Register this worker's queues, write its schedules (BUSY: waited out), then
        announce it: a start that fails (Redis unreachable, an ACL) prints its error
        alone, no banner of a worker that never served."""
        through_busy(lambda: start_steps(self), "start", stop or self._stop.event)
        log_banner(self)

    def forking(self) -> ContextManager[None]:
        """What a process pool holds while it forks a child (see ``Connections.forking``)."""
        share_outages()  # (its children hear that it rides an outage, and stay quiet)
        return self.broker.transport.connections.forking()

    def forked(self) -> None:
        """First thing in a forked child, before any thread of its own starts."""
        self.broker.transport.connections.forked()
        ride_outages_quietly()  # the supervisor says each outage for the worker

    def listen_for_orders(self) -> None:
        """Hear ``minitask shutdown`` from now until ``forget()``."""
        self._orders = Orders(self.broker.registry, self.id, self._on_shutdown)
        self._orders.start()

    def serve_child(self, on_start: Callable[[Job, Message, Optional[float]], None],
                    on_end: Callable[[], None], on_done: Callable[[int, int], bool],
                    on_stopping: Callable[[Optional[Job]], None],
                    on_cancel: Optional[Callable[[Job, Message], None]] = None) -> None:
        """In a process pool child: serve tasks through a worker of this process's own.

        ``on_start`` hears of each attempt with its time limit, ``on_end`` that the
        attempt's function returned, ``on_done`` of the child's counters once its
        outcome is recorded (it answers True when the child is to end, recycled),
        ``on_stopping`` (once a stop is asked) of the task
        still running, ``on_cancel`` of a stop requested for the running attempt
        (the supervisor kills the child).
        """
        child = Worker(self.app, self.queues, concurrency=1, pool="thread", burst=self.burst,
                       grace=self.grace, name=f"{self.name}.{os.getpid()}",
                       prefetch=self.prefetch, subscriber=self.subscriber,
                       schedules=self.schedules)
        serve(self, child, on_start, on_end, on_done, on_stopping, on_cancel)

    def stop(self) -> None:
        """Ask the worker to stop fetching; running tasks finish within the grace."""
        self._stop.request()

    def _remote_stop(self, why: str) -> None:
        """``minitask shutdown``: the same stop as SIGTERM's."""
        if not self._stop.is_set():
            self._stop.reason = why
        self._stop.request()

    def run_once(self) -> bool:
        """Fetch at most one task and run it in this thread: True if one ran, False
        if none was ready."""
        step = self._leases.first_said([*self.queues, *self._broadcasts.lanes.values()], self.fetch)
        job = guarded(step, "fetch tasks", self._stop.event)  # (an outage at a child's start too)
        if job is None:
            return False
        self._runner.execute(job)
        return True

    def _dispatch(self, threads: Slots) -> None:
        while not self._stop.is_set():
            if not threads.wait_for_slot(self._stop.event):
                break
            finished = threads.finished
            try:
                job = guarded(self.fetch, "fetch tasks", self._stop.event)
            except BaseException:  # the worker stops: its shutdown waits for no slot of this
                threads.give_back_slot()
                raise
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

    # -- one task ------------------------------------------------------------

    def fetch(self) -> Optional[Job]:
        """Lease the best ready tasks, trying the queues in order; hand out the first.

        Up to ``prefetch`` tasks are leased per round trip; the rest wait in this
        worker's buffer, their leases renewed by the heartbeat. The pool's threads
        and the dispatcher take turns (the sources keep state of their own).
        """
        with self._fetching:
            return self._source.next_job()

    def follow_on(self) -> Optional[Job]:
        """A pool thread's next job, as it ends one: the one it leased as it recorded the
        outcome, or a fetch; None (the dispatcher takes over) when none is ready, on a
        stop, or when Redis fails (the dispatcher rides the outage)."""
        if self._stop.is_set():
            return None
        try:
            return self.fetch()
        except BrokerError as exc:
            logger.debug("fetch after a task failed (%s): the dispatcher fetches", exc)
            return None

    def execute(self, job: Job) -> None:
        """Run one leased task and record its outcome; never raises for a task's error."""
        self._runner.execute(job)

    def timed_out(self, job: Job, message: Message, elapsed: float) -> None:
        """The process pool killed the attempt at its time limit: record the failure."""
        self._runner.timed_out(job, message, elapsed)

    def cancelled(self, job: Job, message: Message, elapsed: float) -> None:
        """The process pool killed the attempt on a stop request: record it cancelled."""
        self._outcomes.cancelled(job, message, elapsed)

    def give_back(self, job: Job) -> None:
        """Return a leased task to the head of its queue without counting a delivery;
        if Redis fails, that is logged and the task comes back when its lease expires."""
        self._leases.give_back([lease_of(job)])

    def give_back_unstarted(self, held: List[Lease], deliveries: Dict[str, int]) -> None:
        """In a process pool's supervisor: give back, their delivery uncounted, the tasks
        a child that died had leased and not started, each only while its delivery count
        is what the child's lease made it (``deliveries``): none leased it since."""
        self._leases.give_back(held, deliveries)

    def _count(self, job: Job, outcome: Outcome) -> None:
        if outcome.status == "succeeded":
            self.processed += 1
        else:
            self.failed += 1

    # -- presence ------------------------------------------------------------

    def beat(self) -> None:
        """Renew the leases of running tasks and say this worker is alive."""
        refresh_clock(self, self._registers)  # Redis's time, before any deadline is written
        now_ms = self.app.clock.now_ms()
        running = self._leases.renew(now_ms)  # failing, the heartbeat backs off
        # each step on its own: a key one of them cannot use stops none of the others
        beat_step(lambda: self._broadcasts.beat(now_ms), self._beat_refusals)
        if self._registers:
            beat_step(lambda: register(self, now_ms, running, self._holdings.started(
                self.concurrency), self._queues.refusals.stalled()),
                      self._beat_refusals)
            # a limiter no minitask parked
            beat_step(lambda: self.broker.flow.unstick(self.queues, now_ms),
                      self._beat_refusals)
        # metrics go with the heartbeat, never per task; after the leases and the
        # registry, and never in their way (a failure is logged, the counts kept)
        self._runner.observer.flush_quietly()

    def forget(self) -> None:
        self._runner.observer.flush_quietly()
        if self._orders is not None:
            self._orders.end()
        try:
            self.broker.registry.forget(self.id)
        except BrokerError as exc:
            logger.warning("could not unregister worker %s: %s", self.name, exc)


def start_steps(worker: Worker) -> None:
    require_worker_acl(worker)  # first: nothing leased, listed or written before it
    check_queue_keys(worker)  # each queue's keys: served, or sent to by its tasks
    check_redis(worker)
    worker.broker.queues.register_queues(worker.queues)
    rearm_waiting(worker)
    worker._leases.say([*worker.queues, *worker._broadcasts.lanes.values()])
    register(worker, worker.app.clock.now_ms(), 0, [])  # listed now, not a beat later
    try:
        unconfirmed_at_start(worker._ticks.publish, worker._broadcasts.subscribe)
    except BaseException:
        # it exits (or waits out BUSY, and is listed again): no heartbeat is left behind,
        # which a clock ahead would keep listed as live for as long as it is ahead
        worker.forget()
        raise


def check_redis(worker: Worker) -> None:
    """Say at start-up what no error would (this worker's clock far from Redis's, too few
    replicas for durability), go by Redis's time, and cap results below the server's
    proto-max-bulk-len."""
    client = worker.broker.client
    worker._outcomes.limit_to(bulk_limit(client))
    start_clock(worker)
    durability = worker.broker.transport.durability
    replicas = connected_replicas(client) if durability.mode is not None else None
    warning = replica_warning(durability.mode, durability.min_replicas, replicas,
                              durability.timeout, confirming(worker.pool, worker.concurrency))
    if warning is not None:
        logger.warning("%s", warning)


def rearm_waiting(worker: Worker) -> None:
    """Make due the limiters and groups of the served queues that wait for a slot with
    no due time (FlowStore.rearm_waiting: a holder whose flow spec was lost frees
    none at its outcome); a failure is said, never stops the start."""
    now_ms = worker.app.clock.now_ms()
    for queue in worker.queues:
        try:
            worker.broker.flow.rearm_waiting(queue, now_ms)
        except BrokerError as exc:
            logger.warning("worker %s could not look for the limiters and groups of queue "
                           "%r waiting for a slot: %s", worker.name, queue, exc)
