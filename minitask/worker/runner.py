"""Running one attempt: decode the message, find the task, run it in its context.

A pool calls ``execute`` for each job (in a thread, or in its child process);
what the attempt came to goes to the ``Recorder``.
"""
from __future__ import annotations

import asyncio
import difflib
import functools
import inspect
import threading
import time
from types import CoroutineType
from typing import Any, Callable, Coroutine, Dict, Iterable, List, Optional, Tuple

from ..context import running
from ..errors import ArgumentError, DecodeError, TimeLimitExceeded, UnknownTaskError
from ..printable import own_logger, shown_id
from ..tracing import attempt_span
from ..wire.message import Message
from .cancels import CancelBoard
from .coroutine_runs import run_coroutine
from .forks import FORK_MARK, PID_SEEN, current_pid, guarded, leave_if_forked
from .host import Host, HostedTask
from .leases import Job, Leases, fetched_from
from .leftovers import KEPT
from .observe import Observer
from .outcomes import Recorder, naming
from .softlimit import call_with_alarm, call_with_posting, soft_limited

logger = own_logger(__name__)

#: Longest a coroutine cancelled at its time limit gets to unwind before it is left.
UNWIND = 1.0


def decoded(job: Job) -> Optional[Message]:
    """The job's message; None unless it decodes and is the job's (whatever it raises):
    what names a task dead-lettered for an internal error."""
    try:
        message = job.delivery.message()
    except Exception:  # dead-lettered as undecodable
        return None
    return fetched_from(job.queue, message) if message.id == job.task_id else None


def spawn(coro: Coroutine[Any, Any, Any]) -> "asyncio.Task[Any]":
    """``coro`` in an asyncio task of its own on the running loop, made directly, not
    through the loop's task factory: one a task's code installs (that raises, returns
    no Task, or wraps) applies to that code's tasks, never to minitask's (issue 29)."""
    return asyncio.Task(coro, loop=asyncio.get_running_loop())


async def limited(coro: Coroutine[Any, Any, Any], limit: Optional[float], name: str,
                  soft: Optional[float] = None,
                  left: "Optional[List[asyncio.Future[Any]]]" = None,
                  named: "Optional[Callable[[asyncio.Task[Any]], None]]" = None) -> Any:
    """Await ``coro``, cancelling it at ``limit`` seconds (TimeLimitExceeded);
    at ``soft`` seconds SoftTimeLimitExceeded is thrown into it first. A coroutine
    that does not end once cancelled goes in ``left`` (the asyncio pool's: its slot
    is held for it, ``pools/overruns.py``). ``named`` is told of the asyncio task
    ``coro`` runs in, before its first step (the asyncio pool's loop watch names the
    attempt whose code blocks the loop from it).

    Not ``asyncio.wait_for``: a TimeoutError the task raises itself must stay
    the task's error, not become a time limit. If the caller is cancelled, so
    is ``coro``.
    """
    if soft is not None:
        coro = soft_limited(coro, soft, name)
    if limit is None:
        return await coro
    inner = spawn(coro)
    if named is not None:
        named(inner)
    try:
        done, _ = await asyncio.wait({inner}, timeout=limit)
    except asyncio.CancelledError:
        if not await settle(inner) and left is not None:
            left.append(inner)
        raise
    if inner in done:
        return inner.result()
    if not await settle(inner) and left is not None:
        left.append(inner)
    raise TimeLimitExceeded(f"task {name!r} ran past its timeout of {limit} s and was "
                            f"cancelled")


async def settle(future: "asyncio.Future[Any]") -> bool:
    """Cancel ``future`` and give it ``UNWIND`` seconds to end; False if it has not
    (a coroutine that takes its cancellation and goes on): the caller says so, and
    the asyncio pool holds its slot for it (``pools/overruns.py``); on the other
    pools its loop ends with the attempt (``coroutine_runs``), which names it."""
    future.cancel()
    await asyncio.wait({future}, timeout=UNWIND)
    if not future.done():
        # kept from the collector until it ends: collecting a pending asyncio task closes
        # its coroutine, and one that takes every exception (GeneratorExit too) then ran
        # for ever in whichever thread collected it (a stopped worker's process hung);
        # the exit ends it instead (``leftovers.exit_past_leftovers``)
        KEPT.add(future)
        future.add_done_callback(KEPT.discard)
        return False
    if not future.cancelled():
        future.exception()  # retrieved: no "never retrieved" warning
    return True


def cancelled_by_code(name: str) -> RuntimeError:
    """The failure of an attempt whose asyncio task (or its coroutine's) a task's code
    cancelled, not minitask (its cancel request, time limits, stop)."""
    return RuntimeError(f"task {name!r}: its attempt was cancelled by code other than "
                        f"minitask's (a task's code cancelled the asyncio pool's own tasks); "
                        f"a task should cancel only the asyncio tasks it made")


#: The arguments a task is called with: (args, kwargs).
Arguments = Tuple[List[Any], Dict[str, Any]]


def call_in_thread(task: HostedTask, arguments: Arguments, limit: Optional[float],
                   by_signal: bool = False, stops: Optional[Tuple[CancelBoard, str]] = None,
                   pid: Optional[int] = None) -> Any:
    """Call the task's function; an ``async def`` one runs to its end (or its time
    limit, or its cancel through ``stops``: the board and the task's id, for its
    stopper: made only then, not for every attempt) on an event loop of its own, whose
    end is bounded (``run_coroutine``): a copy of this process (``pid``) its code
    forked ends as that code does (``forks.guarded``), before the loop's end.

    A plain function's soft limit comes by ``SIGALRM`` when ``by_signal`` (a
    process pool child, whose main thread runs it), else as an asynchronous
    exception; a coroutine's through asyncio, never by signal.
    """
    args, kwargs = arguments
    soft = task.options.soft_timeout
    if soft is None or inspect.iscoroutinefunction(task.func):
        value = task.func(*args, **kwargs)
    elif by_signal and threading.current_thread() is threading.main_thread():
        value = call_with_alarm(task.func, args, kwargs, soft, task.name)
    else:
        value = call_with_posting(task.func, args, kwargs, soft, task.name)
    if isinstance(value, CoroutineType):  # (``inspect.iscoroutine``, without its call)
        stoppable = None if stops is None else functools.partial(stops[0].set_stopper,
                                                                 stops[1])
        value = run_coroutine(limited(guarded(value, current_pid() if pid is None else pid),
                                      limit, task.name, soft), task.name, limit, stoppable)
    return value


class Runner:
    """Runs leased jobs; in a process pool child, tells the pool of each attempt."""

    def __init__(self, host: Host, recorder: Recorder, leases: Leases) -> None:
        self._host = host
        self._recorder = recorder
        self._leases = leases
        #: In a process pool child: hears of each task before it runs, with its time
        #: limit (the task's ``timeout``).
        self.on_start: Optional[Callable[[Job, Message, Optional[float]], None]] = None
        #: In a process pool child: hears that the attempt's function returned.
        self.on_end: Optional[Callable[[], None]] = None
        #: The attempts running here, for ``cancel(running=True)``.
        self.cancels = CancelBoard()
        #: In a process pool child: asks the supervisor to kill the attempt, on request.
        self.on_cancel: Optional[Callable[[Job, Message], None]] = None
        #: Hooks, metrics and progress of the attempts run here.
        self.observer = Observer(host)

    def resolve(self, job: Job, bury: bool = True) -> Optional[Tuple[Message, HostedTask]]:
        """The job's message and task; None when it has none (dead-lettered, unless
        ``bury`` is False: then the caller resolves it again with ``bury``)."""
        try:
            message = job.delivery.message()
            if message.id != job.task_id:
                raise DecodeError(f"cannot decode message {shown_id(job.task_id)!r}: its body "
                                  f"names the id {shown_id(message.id)!r}; a producer other "
                                  f"than minitask wrote it wrong")
            if message.workflow is not None:  # a broken frame: never run
                self._recorder.workflows.check(message)
        except DecodeError as exc:
            if bury:
                self._recorder.bury(job, None, exc, "the message cannot be decoded")
            return None
        message = fetched_from(job.queue, message)
        task = self._host.tasks.get(message.task)
        if task is None:
            if bury:
                error = UnknownTaskError(
                    unknown_task_message(message.task, self._host.name, self._host.tasks))
                self._recorder.bury(job, message, error, "unknown task")
                self.observer.buried(message, error)
            return None
        try:  # a producer that sends by name could not check them: a call that cannot
            task.check_call(message.args, message.kwargs)  # bind never will, on any attempt
        except ArgumentError as exc:
            if bury:
                self._recorder.bury(job, message, exc, "its arguments do not fit the task")
                self.observer.buried(message, exc)
            return None
        return message, task

    def arguments(self, job: Job, message: Message, task: HostedTask,
                  bury: bool = True) -> Optional[Arguments]:
        """The arguments to call the task with, the app's registered types made
        objects again (``app.register_type``); None when one cannot be: an extension
        code this app did not register, or a decode function that raised
        (dead-lettered, unless ``bury`` is False), never retried."""
        try:
            return self._host.broker.types.arguments_from_wire(task.name, message.args,
                                                               message.kwargs)
        except Exception as exc:
            if not isinstance(exc, DecodeError):
                raise
            failure: BaseException = exc
        except BaseException as exc:  # a decode function is the app's code: its
            failure = exc  # BaseException is this task's failure, not the pool thread's end
        if bury:
            self._recorder.bury(job, message, failure, "an argument cannot be decoded")
            self.observer.buried(message, failure)
        return None

    def execute(self, job: Job) -> None:
        """Run one leased task and record its outcome; never raises for a task's error.

        Whatever goes wrong while handling it ends in an outcome for it: a failure
        no check foresaw dead-letters the message rather than leaving it leased to a
        worker that goes on (or to a child that dies and takes it again).
        """
        try:
            self._execute(job)
        except Exception as exc:  # the task's own BaseExceptions are caught in _attempt,
            # a decode function's in arguments, an encode function's (and an unreadable
            # error text's) in Recorder.finish: one from here on is the worker's own end
            self._recorder.bury(job, decoded(job), exc, "internal error while handling it")

    def _execute(self, job: Job) -> None:
        found = self.resolve(job)
        if found is None:
            return
        message, task = found
        arguments = self.arguments(job, message, task)
        if arguments is None:
            return
        on_cancel = self.on_cancel
        cancel = self.cancels.enter(job.task_id, None if on_cancel is None
                                    else lambda: on_cancel(job, message))
        try:
            self._attempt(job, message, task, cancel, arguments)
        finally:
            self.cancels.leave(job.task_id, cancel)

    def _attempt(self, job: Job, message: Message, task: HostedTask,
                 cancel: threading.Event, arguments: Arguments) -> None:
        if cancel.is_set():  # asked to stop while it waited in this worker's buffer
            self._recorder.cancelled(job, message, 0.0)
            return
        limit = task.options.timeout
        if self.on_start is not None:
            if limit is not None:
                # this attempt may be killed with its process: record what is done, and
                # give back what has not started, so neither waits for a lease to expire
                if self._recorder.waiting():
                    self._recorder.record_waiting()
                self._leases.give_back_buffer()
            self.on_start(job, message, limit)
        started = time.monotonic()
        # a copy of this process the task's code forks ends as it does (``forks``: the
        # pid read and compared inline, with no call a task)
        pid = PID_SEEN[0] if FORK_MARK is not None and FORK_MARK[0] else current_pid()
        value: Any = None
        error: Optional[BaseException] = None
        # the span lasts until the outcome is recorded: a failure met while recording
        # it (the return value's encoding) is the attempt's, the span's too
        with attempt_span(message) as span:
            with running(message, job.delivery.delivery, cancel,
                         self.observer.reporter(message)) as context:
                self.observer.started(context, message)
                self.observer.prerun(context)
                if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
                    leave_if_forked(pid)  # a hook's copy: before the task's code
                try:
                    # in a process pool child (on_start is set) the main thread runs it
                    # a thread pool cancels a coroutine on its loop, as the asyncio
                    # pool does (a process pool child's supervisor kills it instead)
                    value = call_in_thread(task, arguments, limit, self.on_start is not None,
                                           None if self.on_cancel is not None else
                                           (self.cancels, job.task_id), pid)
                except BaseException as exc:  # KeyboardInterrupt and the like too: the
                    error = exc  # worker's own stop comes through its signal relay
                if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
                    leave_if_forked(pid, error)  # (the copy records nothing, runs no hook)
                if error is not None:
                    span.failed(error)
            if self.on_end is not None:
                self.on_end()  # no longer at risk of a kill: recording may wait for Redis
            duration = time.monotonic() - started
            self.observer.ending(message)  # its progress first, cancelled or not
            if cancel.is_set():  # whatever it came to, it was asked to stop: cancelled
                self._recorder.cancelled(job, message, duration)
                self.observer.postrun(context, "cancelled", value, error)
                return
            if error is None and limit is not None and duration > limit:
                error = TimeLimitExceeded(f"task {task.name!r} ran {duration:.3f} s, over "
                                          f"its timeout of {limit} s")
            ran_into = error
            status, error = self._recorder.finish(job, message, value, error, duration)
            if error is not None and error is not ran_into:  # met while recording it
                span.failed(error)
        self.observer.ended(context, message, status, value, error, duration)
        self.observer.postrun(context, status, value, error)

    def timed_out(self, job: Job, message: Message, elapsed: float) -> None:
        """The process pool killed the attempt at its time limit: record the failure."""
        task = self._host.tasks[message.task]
        logger.warning("task %s %s ran past its timeout of %s s: killed its process",
                       job.task_id, task.name, task.options.timeout,
                       extra=naming(job.task_id, task.name))
        error = TimeLimitExceeded(f"task {task.name!r} ran past its timeout of "
                                  f"{task.options.timeout} s and was killed")
        status, _ = self._recorder.finish(job, message, None, error, elapsed)
        with running(message, job.delivery.delivery) as context:  # for the hooks
            self.observer.ended(context, message, status, None, error, elapsed)


def close_names(name: str, known: Iterable[str], limit: int = 3) -> List[str]:
    """Registered names a user may have meant: the same name under a longer import
    path (``jobs.mul`` for ``pkg.jobs.mul``) first, then the most alike."""
    names = sorted(known)
    suffix = [n for n in names if n.endswith("." + name) or name.endswith("." + n)]
    alike = difflib.get_close_matches(name, names, n=limit, cutoff=0.6)
    return (suffix + [n for n in alike if n not in suffix])[:limit]


def unknown_task_message(name: str, app: str, known: Iterable[str]) -> str:
    """Why a message names no registered task, and what to do about it."""
    names = list(known)
    close = close_names(name, names)
    if close:
        hint = f"did you mean {' or '.join(repr(n) for n in close)}?"
    else:
        hint = (f"the worker knows {len(names)} task(s)" + (
            f": {', '.join(sorted(names)[:10])}" + (", ..." if len(names) > 10 else "")
            if names else ""))
    return (f"no task named {name!r} is registered in app {app!r} on this worker; {hint} "
            f"Check that the worker imports the module defining it (-A, or a minitask.tasks "
            f"entry point), that producer and worker agree on its name (name=...), and that "
            f"no other project uses the app name {app!r} on the same broker")
