"""A process pool child's loop: one task at a time in its process, the supervisor
told of each.

The supervisor (``pools/processes.py``) forks the child, whose worker
(``Worker.serve_child``) serves tasks through a worker of its own process,
made here into a child's: it registers nothing (the supervisor speaks for its
children), records each outcome with its next fetch, and, before the supervisor
kills it for a stop request, records what is done and gives back what has not
started.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..errors import BrokerError
from ..printable import own_logger
from ..wire.message import Message
from .forks import FORK_MARK, PID_SEEN, current_pid, leave_if_forked
from .leases import Job

if TYPE_CHECKING:
    from .loop import Worker

logger = own_logger("minitask.worker.loop")  # the lines a worker has always logged


def serve(parent: Worker, child: Worker,
          on_start: Callable[[Job, Message, Optional[float]], None],
          on_end: Callable[[], None], on_done: Callable[[int, int], bool],
          on_stopping: Callable[[Optional[Job]], None],
          on_cancel: Optional[Callable[[Job, Message], None]]) -> None:
    """Serve tasks through ``child``, the worker ``parent`` made for this child process
    (see ``Worker.serve_child`` for what the callbacks hear)."""
    child.redis_time = parent.redis_time  # the supervisor's (each process measures again)
    child._outcomes.follow(parent._outcomes)  # its name and the cap read at start
    if on_cancel is not None:
        child._runner.on_cancel = before_kill(child, on_cancel)
    run_child(child, on_start, on_end, lambda: on_done(child.processed, child.failed),
              on_stopping)


def before_kill(worker: Worker, on_cancel: Callable[[Job, Message], None]
                ) -> Callable[[Job, Message], None]:
    """Before the supervisor kills this child for a stop request: record what is
    done and give back what has not started, so neither waits for its lease."""
    def stop(job: Job, message: Message) -> None:
        try:
            if worker._outcomes.waiting():
                worker._outcomes.flush(fetch=False)
            worker._leases.give_back_buffer()
        except BrokerError as exc:
            logger.warning("before stopping task %s: %s", job.task_id, exc)
        on_cancel(job, message)
    return stop


def run_child(worker: Worker, on_start: Callable[[Job, Message, Optional[float]], None],
              on_end: Callable[[], None], on_done: Callable[[], bool],
              on_stopping: Callable[[Optional[Job]], None]) -> None:
    """Serve tasks one at a time in this process (a process pool child).

    ``on_start`` hears of each task before it runs, with its time limit, ``on_end``
    when its function returns, ``on_done`` once its outcome is recorded (True: end
    now, between tasks, as on a stop); ``on_stopping``, once a stop is asked, of
    the task still running (``on_end`` stops an alarm the task left armed:
    ``softlimit.AlarmGuard``)."""
    worker._runner.on_start, worker._runner.on_end = on_start, on_end
    worker._shutdown.on_stopping = on_stopping
    worker._registers = False  # the supervisor speaks for its children
    worker._outcomes.batched = True
    worker._stop.open_bell()
    restore = worker._stop.install_signals()
    worker._heartbeat.start(worker.heartbeat_period, worker.beat, worker._outcomes,
                            worker._stop.event, worker._shutdown.stopping)
    worker._cancel_watch.start()
    pid = current_pid()
    try:
        while not worker._stop.is_set():
            ran = worker.run_once()
            # a copy of this child that code run for the task (a hook) forked and that
            # came back here ends: it would serve tasks unsupervised, and hear this
            # child's stop bell (a socket both hold) ring for ever, never for it (the
            # pid compared inline: ``forks``)
            if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
                leave_if_forked(pid)
            if ran:
                worker._holdings.clear_running()
                if on_done():
                    break
            elif worker.burst and not worker._source.more_due_now():
                break
            else:
                worker._source.wait()
    finally:
        # No task runs any more: the heartbeat ends first (its flush races none below)
        worker._stop.request()
        worker._heartbeat.end()
        worker._outcomes.flush_last()
        worker._leases.release_all()
        worker._cancel_watch.end()
        restore()
        worker._stop.silence()
        worker._runner.observer.flush_quietly()
        if worker._stop.reason:
            logger.debug("child stopped on %s", worker._stop.reason)
