"""The process pool: child processes that each fetch and run one task at a time.

The supervisor kills a child whose attempt runs past its time limit, replaces children
that die or are recycled (``recycling``; after a growing delay while they keep dying as
they start: ``starts``), and gives the stop grace to all of them. A
child whose ``worker_process_init`` hook failed takes no work and is not replaced: a
hook that fails once fails again, and forking for it in a loop would serve nothing.

A child tells its supervisor only what the supervisor acts on: that it serves (or why its
set-up failed), the start and end of attempts that have a time limit, that it ends to be
recycled, and, once a stop is asked, the task it still runs (then that it finished it). Its
counters, the id of the task it runs and those it has not started sit in shared memory: a
message per task would cost the supervisor a wake-up per task, as much CPU as the child
spends. The ids are read when it dies: to name its task, to give the others back.
"""
from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, ContextManager, Dict, Generic, List, Optional, Protocol

from ...errors import BrokerError, MinitaskError
from ...hooks import Hooks
from ...printable import own_logger
from ...wire.message import Message
from ..leases import Lease, count_holdings
from ..leftovers import KEPT, exit_past_leftovers, kept_too_many
from ..signals import SignalRelay
from ..softlimit import AlarmGuard
from .job import J
from .recycling import Recycling
from .starts import Respawns, die_with
from .unstarted import Unstarted

logger = own_logger(__name__)

#: A runaway attempt is killed at most this long after its time limit.
KILL_SLACK = 0.2
#: The signals that ask for a graceful stop.
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
#: Bytes of a running task's id kept in shared memory, to name it if its child dies.
_ID_BYTES = 200
#: Exit code of a child whose worker_process_init hook failed (EX_CONFIG).
_INIT_FAILED = 78


class Supervised(Protocol[J]):
    """What the process pool needs of the worker it supervises children for."""

    concurrency: int
    prefetch: int
    grace: float
    burst: bool
    processed: int
    failed: int
    recycled: int
    recycling: Optional[Recycling]
    hooks: Hooks
    running_ids: Optional[List[str]]

    @property
    def heartbeat_period(self) -> float: ...

    def starting(self, stop: Optional[threading.Event] = None) -> None: ...

    def listen_for_orders(self) -> None: ...

    def forking(self) -> ContextManager[None]: ...

    def forked(self) -> None: ...

    def beat(self) -> None: ...

    def forget(self) -> None: ...

    def timed_out(self, job: J, message: Message, elapsed: float) -> None: ...

    def cancelled(self, job: J, message: Message, elapsed: float) -> None: ...

    def give_back(self, job: J) -> None: ...

    def give_back_unstarted(self, held: List[Lease], deliveries: Dict[str, int]) -> None: ...

    def serve_child(self, on_start: Callable[[J, Message, Optional[float]], None],
                    on_end: Callable[[], None], on_done: Callable[[int, int], bool],
                    on_stopping: Callable[[Optional[J]], None],
                    on_cancel: Optional[Callable[[J, Message], None]] = None) -> None: ...


@dataclass
class _Child(Generic[J]):
    """What the supervisor knows of one child process."""

    process: Any
    conn: Connection
    counts: Any  # shared int64 [processed, failed, leases held], written by the child
    current: Any  # shared char buffer: the id of the task the child runs, or empty
    unstarted: Unstarted  # the tasks it leased and has not started
    job: Optional[J] = None
    message: Optional[Message] = None
    started: float = 0.0
    deadline: Optional[float] = None
    #: Killed on purpose (a time limit, the end of the grace): its death is no news.
    killed: bool = False
    #: Why it ended between tasks to be replaced, as it said before exiting.
    recycled: str = ""
    #: Why its worker_process_init hook failed: it took no work.
    init_failed: str = ""

    @property
    def processed(self) -> int:
        return int(self.counts[0])

    @property
    def failed(self) -> int:
        return int(self.counts[1])

    @property
    def running_id(self) -> str:
        """The task the child said it runs: from its events, else from shared memory."""
        if self.job is not None:
            return self.job.task_id
        return bytes(self.current.value).decode("utf-8", "replace")


class ProcessPool(Generic[J]):
    """Supervises ``worker.concurrency`` children that run tasks one at a time."""

    def __init__(self, worker: Supervised[J]) -> None:
        self.worker = worker
        self.children: Dict[int, _Child[J]] = {}
        self.retired_processed = 0
        self.retired_failed = 0
        #: Children that ended to be recycled, and why the last set-up failed.
        self.recycled = 0
        self.init_failure = ""
        self._ready = False
        self._starved = False
        self._respawns = Respawns()  # (replacements of children that keep dying at start)
        self._context = multiprocessing.get_context("fork")
        self._stop = threading.Event()
        #: What asked the stop (a signal's name, ``minitask shutdown``...), once asked.
        self.why = ""

    def run(self) -> None:
        worker = self.worker

        def at_once() -> None:
            for child in list(self.children.values()):
                _kill(child.process.pid)
            os.write(2, b"minitask: second interrupt: killed the children and exiting "
                        b"at once; their tasks run again after their leases expire\n")
            os._exit(130)

        # The children are signalled by _shut_down, not at once: a child that Ctrl-C
        # signalled too would hear of the stop twice. Installed before the worker is
        # listed (starting): a SIGTERM sent as soon as it is seen stops it gracefully.
        restore = SignalRelay(lambda name: self.stop(name, tell_children=False),
                              at_once).install()
        try:
            worker.starting(self._stop)
            worker.listen_for_orders()
        except BaseException:
            restore()
            raise
        beat = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                name="minitask-supervisor-heartbeat")
        beat.start()
        try:
            for _ in range(worker.concurrency):
                self._spawn()
            self._supervise()
        finally:
            self._stop.set()
            self._shut_down()
            restore()
            beat.join(timeout=5)
            self._count()  # for the worker's last line
            worker.forget()
            worker.hooks.call("worker_shutdown", worker)
        if self._starved:
            raise MinitaskError(f"no child is left to serve: {self.init_failure}")

    def stop(self, why: str, tell_children: bool = True) -> None:
        """Stop as on SIGTERM (``why`` names what asked): children get the grace, then
        what still runs is given back. ``tell_children`` signals them at once rather
        than at the supervisor's next look, so that an idle child fetches no more."""
        if self._stop.is_set():
            return
        self.why = why
        self._stop.set()
        if tell_children:
            for child in list(self.children.values()):
                _signal(child.process.pid, signal.SIGTERM)
        logger.info("%s received: stopping children (grace %s s)", why, self.worker.grace)

    # -- children ------------------------------------------------------------

    def _spawn(self) -> None:
        parent_end, child_end = self._context.Pipe(duplex=False)
        counts = self._context.RawArray(ctypes.c_int64, 3)
        current = self._context.RawArray(ctypes.c_char, _ID_BYTES + 1)
        unstarted = Unstarted(self._context, self.worker.prefetch)
        process = self._context.Process(target=_child_main,
                                        args=(self.worker, child_end, os.getpid(), counts,
                                              current, unstarted),
                                        name="minitask-child", daemon=False)
        # A stop signal must not reach the child before it has handlers of its own
        # (the supervisor's, inherited, would ignore it): blocked across the fork, it
        # waits for the child's _early_signals, and for this process's handler here.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            with self.worker.forking():  # no other thread holds the Redis pool's lock
                process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        child_end.close()
        assert process.pid is not None  # set by start()
        self.children[process.pid] = _Child[J](process, parent_end, counts, current, unstarted)
        self._respawns.started(process.pid)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            for _ in range(self._respawns.due()):
                self._spawn()
            if not self.children and not self._respawns.owed:
                # out of children for want of set-up, not done with a burst: say so
                self._starved = bool(self.init_failure) and (
                    not self.worker.burst or not self._ready)
                return
            self._read_events(timeout=0.1)
            self._enforce_time_limits()
            for pid, child in list(self.children.items()):
                if not child.process.is_alive():
                    code = child.process.exitcode
                    self._reap(pid, child)
                    # a burst child that ends on its own is done; one that was killed
                    # or crashed is replaced, or what is ready would never run (one
                    # recycled was, as it said so)
                    if not self._stop.is_set() and not child.init_failed and (
                            not self.worker.burst or code != 0) and not child.recycled:
                        self._respawns.owe()  # at once, unless children die as they start

    def _read_events(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for children's messages and take them in."""
        conns = {child.conn: child for child in self.children.values()}
        for conn in wait(list(conns), timeout=timeout):
            self._read(conns[conn])  # type: ignore[index]

    def _enforce_time_limits(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            if child.deadline is not None and now > child.deadline + KILL_SLACK:
                self._time_out(child)

    def _read(self, child: _Child[J]) -> None:
        try:
            while child.conn.poll():
                event = child.conn.recv()
                if event[0] == "start":
                    _, job, message, timeout = event
                    child.job, child.message, child.started = job, message, time.monotonic()
                    child.deadline = child.started + timeout
                elif event[0] == "done":
                    child.job, child.deadline = None, None
                elif event[0] == "running":
                    child.job = event[1]
                elif event[0] == "cancel":
                    self._cancel(child, event[1], event[2], event[3])
                elif event[0] == "ready" and not self._ready:
                    self._ready = True
                    self.worker.hooks.call("worker_ready", self.worker)
                elif event[0] == "recycle" and not child.recycled:
                    child.recycled = event[1]
                    if not self._stop.is_set():  # its successor starts while it exits
                        self._spawn()
                elif event[0] == "init_failed":
                    child.init_failed = self.init_failure = event[1]
        except (EOFError, OSError):
            pass  # the child is gone; _reap handles it

    def _time_out(self, child: _Child[J]) -> None:
        job, message = child.job, child.message
        child.killed = True
        _kill(child.process.pid)
        child.process.join(timeout=5)
        child.deadline = None
        if job is None or message is None:
            return
        self.worker.timed_out(job, message, time.monotonic() - child.started)
        self.retired_failed += 1  # recorded here, not by the killed child
        child.job = child.message = None

    def _cancel(self, child: _Child[J], job: J, message: Message, ran: float) -> None:
        """``cancel(running=True)`` reached the child's attempt, which had run ``ran``
        seconds: kill the child (it is replaced, quietly: the kill is ours) and record
        the task cancelled, unless it finished first."""
        asked = time.monotonic()
        child.killed = True
        _kill(child.process.pid)
        child.process.join(timeout=5)
        child.deadline = None
        logger.info("task %s: stop requested; killed child %d", job.task_id,
                    child.process.pid, extra={"task_id": job.task_id, "task_name": message.task})
        self.worker.cancelled(job, message, ran + time.monotonic() - asked)
        self.retired_failed += 1  # recorded here, not by the killed child
        child.job = child.message = None

    def _reap(self, pid: int, child: _Child[J]) -> None:
        child.process.join(timeout=1)
        self._read(child)  # what it said last, before it exited
        del self.children[pid]
        left = child.unstarted.give_back(self.worker.give_back_unstarted)  # (not its task's)
        self.retired_processed += child.processed
        self.retired_failed += child.failed
        code = child.process.exitcode
        running = child.running_id
        at_start = self._respawns.ended(pid, bool(
            child.processed or child.failed or running or child.killed or child.recycled
            or child.init_failed or code == 0 and self.worker.burst))
        if child.init_failed:
            logger.error("child %d takes no work and is not replaced (%d left): %s", pid,
                         len(self.children), child.init_failed)
        elif child.recycled and code == 0 and not running:
            self.recycled += 1
            logger.info("child %d recycled: %s%s", pid, child.recycled,
                        "" if self._stop.is_set() else "; replacing it")
        elif child.killed or code == 0 and not running and not at_start:
            # A child that exits 0 between tasks has recorded or given back all it held
            # (it logs itself when it could not); one killed on purpose was logged when
            # killed. One that exits 0 mid-task (``os._exit(0)`` in the task) died. One
            # that exits 0 unannounced (``os._exit(0)`` in a thread its task left, say)
            # holding leases took tasks with it: say so, or nothing says why they wait.
            held = int(child.counts[2]) - left
            if held and not child.killed:
                logger.warning("child %d exited with code 0 between tasks, holding %d "
                               "leased task(s) it had not finished (their outcomes not yet "
                               "recorded, say); they will be delivered again "
                               "after their leases expire%s", pid, held,
                               "" if self._stop.is_set() else "; replacing the child")
        elif running:
            logger.error("child %d died (exit code %s) while running task %s; it will be "
                         "delivered again after its lease expires%s", pid, code, running,
                         "" if self._stop.is_set() else "; replacing the child")
        elif not self._stop.is_set():  # (a row of deaths at start is said once)
            self._respawns.exited(pid, code)
        child.conn.close()

    def _shut_down(self) -> None:
        """Ask children to stop, give them the grace, then kill and give back the rest."""
        for child in self.children.values():
            _signal(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.worker.grace
        while self.children and time.monotonic() < deadline:
            self._read_events(timeout=0.1)
            self._enforce_time_limits()  # a runaway must not use up the whole grace
            for pid, child in list(self.children.items()):
                if not child.process.is_alive():
                    self._reap(pid, child)
        for pid, child in list(self.children.items()):
            child.killed = True
            _kill(pid)
            child.process.join(timeout=5)
            if child.job is not None:
                logger.warning("grace is over: giving back task %s", child.job.task_id,
                               extra={"task_id": child.job.task_id})
                self.worker.give_back(child.job)
                child.job = None
            self._reap(pid, child)

    def _count(self) -> None:
        """Add up the children's counters, as the worker reports them."""
        worker = self.worker
        worker.processed = self.retired_processed + sum(
            c.processed for c in list(self.children.values()))
        worker.failed = self.retired_failed + sum(
            c.failed for c in list(self.children.values()))
        worker.recycled = self.recycled
        worker.running_ids = [task_id for task_id in (
            c.running_id for c in list(self.children.values())) if task_id]

    def _heartbeat_loop(self) -> None:
        worker = self.worker
        period = worker.heartbeat_period
        while True:
            self._count()
            try:
                worker.beat()
            except BrokerError as exc:
                logger.debug("supervisor heartbeat failed: %s", exc)
            if self._stop.wait(period):
                return


def _early_signals() -> None:
    """Until its worker installs its own handlers, a child ends on SIGTERM (it has
    fetched nothing yet) and leaves SIGINT to its supervisor, which stops it."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _child_main(parent: Supervised[J], conn: Connection, supervisor_pid: int,
                counts: Any, current: Any, unstarted: Unstarted) -> None:
    """A child process: fetch and run one task at a time, telling the supervisor."""
    _early_signals()
    parent.forked()
    die_with(supervisor_pid)
    failed = parent.hooks.init(parent)
    if failed is not None:
        conn.send(("init_failed", failed))
        conn.close()
        sys.exit(_INIT_FAILED)
    conn.send(("ready",))
    count_holdings(functools.partial(counts.__setitem__, 2), unstarted.told())  # (for _reap)
    recycling = parent.recycling
    handled = [0]
    # The heartbeat thread reports the running task once a stop is asked, while the
    # main thread finishes it: under this lock, what is reported and what is done
    # stay in order, so the supervisor never goes on believing a finished task runs.
    lock = threading.Lock()
    timed = [False]
    began = [0.0]                             # when the running attempt started
    running_job: List[Optional[J]] = [None]   # started, outcome not recorded yet
    reported: List[Optional[J]] = [None]      # told to the supervisor as running
    alarms = AlarmGuard()  # a timer a task leaves armed rings in no later task

    def send(event: Any) -> None:
        with lock:
            conn.send(event)

    def on_start(job: J, message: Message, timeout: Optional[float]) -> None:
        alarms.task = message.task
        current.value = job.task_id.encode("utf-8", "replace")[:_ID_BYTES]
        with lock:
            running_job[0] = job
        began[0] = time.monotonic()
        timed[0] = timeout is not None
        if timed[0]:  # the supervisor kills the attempt at its limit
            send(("start", job, message, timeout))

    def on_end() -> None:
        if signal.setitimer(signal.ITIMER_REAL, 0)[0]:  # first: one C call (AlarmGuard)
            alarms.left()
        if timed[0]:  # returned in time: recording its outcome must not be cut short
            timed[0] = False
            send(("done",))

    def on_done(processed: int, failed: int) -> bool:
        counts[0], counts[1] = processed, failed
        current.value = b""
        with lock:
            finished, running_job[0] = running_job[0], None
            if finished is not None and reported[0] is finished:
                reported[0] = None
                conn.send(("done",))  # its outcome is recorded: nothing to give back
        handled[0] += 1
        why = (None if recycling is None else recycling.due(handled[0])) or (
            kept_too_many() if KEPT else None)  # (no call a task: KEPT is mostly empty)
        if why is not None:  # it ends as on a stop, between tasks: nothing is lost
            send(("recycle", why))
        return why is not None

    def on_stopping(running: Optional[J]) -> None:
        with lock:
            # only a task whose outcome is not recorded yet: it is the supervisor's to
            # give back if the grace runs out
            if running is not None and running is running_job[0]:
                reported[0] = running
                conn.send(("running", running))

    def on_cancel(job: J, message: Message) -> None:
        # the supervisor kills this child; how long the attempt ran is known only here
        send(("cancel", job, message, time.monotonic() - began[0]))

    parent.serve_child(on_start, on_end, on_done, on_stopping, on_cancel)
    conn.close()
    exit_past_leftovers(0)  # a thread a task left running must not hold the child


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _kill(pid: int) -> None:
    _signal(pid, signal.SIGKILL)


__all__: List[str] = ["ProcessPool"]
