"""The asyncio pool: up to N attempts at once on one event loop.

The worker's own parts do what they do for the thread pool: the dispatcher takes a
slot, leases work from the source, and hands it here; the heartbeat thread renews
leases; the stop gives back what is left. This pool runs each attempt as a task on an
event loop in a thread of its own: an ``async def`` task is awaited there (cancelled at
its ``timeout``, or when ``cancel(running=True)`` asks), a plain function runs in the
pool's executor so that it cannot block the loop. A plain success is recorded from
the loop without blocking it (``worker/loop_acks.py``: its ack and the next fetch
on an asyncio connection); every other outcome, and one whose round trip there
failed, by a few threads beside the loop: recording it may wait for Redis.

The dispatcher leases up to as many tasks as slots are free in one round trip (at
least ``prefetch``): they start at once, so order is kept as well as with one fetch per
task. Once work flows, an attempt that ends hands its slot straight to the next: the
recording thread records its outcome with the next fetch in one round trip
(``follow_on``), and the task it leased starts on the loop in the same slot.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Dict, List, Optional, Tuple

from ...context import TaskContext, running
from ...errors import TimeLimitExceeded
from ...hooks import Hooks
from ...printable import log_error, own_logger
from ...wire.message import Message
from ..forks import FORK_MARK, PID_SEEN, current_pid, leave_if_forked
from ..leases import Job
from ..outcomes import Recorder
from ..runner import Runner, cancelled_by_code, decoded, limited, settle
from .contained import (Raised, begun, contained, contained_call, hold, holder, shielded,
                        swallowed, unbegun)
from .escapes import Escapes, serve_loop
from .overruns import Overruns
from .recording import RecordingThreads, outlast
from .slots import FixedSlots
from .watchdog import LoopWatch

if TYPE_CHECKING:
    from ..loop_acks import LoopAcks

logger = own_logger(__name__)

#: Most threads that record outcomes beside the loop: a round trip each, in parallel;
#: no more than the pool has slots (each slot has one step in flight at a time).
RECORDERS = 4
#: Longest the pool waits for cancelled attempts to unwind once the grace is over.
CANCEL_WAIT = 5.0
#: Longest the pool waits for its loop to close its connections to Redis.
CLOSE_WAIT = 1.0


def confirming(pool: str, concurrency: int) -> Tuple[int, str]:
    """How many outcomes a worker of ``pool`` records at once when replicas are to
    confirm each (``durability``), and why: those go through the asyncio pool's
    recording threads, never its loop (``LoopAcks``), so they cap it."""
    if pool == "asyncio":
        threads = max(1, min(RECORDERS, concurrency))
        return threads, f"its asyncio pool confirms outcomes on {threads} recording thread(s)"
    return concurrency, "one per slot"


class AsyncioPool(FixedSlots):
    """``size`` slots; each attempt a task on one event loop in its own thread."""

    def __init__(self, size: int, runner: Runner, recorder: Recorder, hooks: Hooks,
                 on_free: Optional[Callable[[int], None]] = None,
                 follow_on: Callable[[], Optional[Job]] = lambda: None,
                 give_back: Callable[[Job], None] = lambda job: None,
                 quick: "Optional[LoopAcks]" = None) -> None:
        super().__init__(size, on_free)
        #: Records plain successes from the loop (None: every outcome off it).
        self._quick = quick
        self._follow_on = follow_on
        #: Returns a leased job that will not run to its queue (a Redis round trip).
        self._give_back = give_back
        self._runner = runner
        self._hooks = hooks
        self._recorder = recorder
        self._attempts: Dict[str, "asyncio.Task[None]"] = {}
        self.overruns = Overruns(size)  # slots held by coroutines left past their cancel
        #: Whether each task function is an ``async def`` one, by the function itself
        #: (a task's function can be replaced while the worker runs: a test's patch).
        self._coroutine_functions: Dict[Callable[..., Any], bool] = {}
        #: The worker's: a copy of it a hook forks (its child, returning) ends as it
        #: comes back here, as on the other pools: never a worker, nor the task's code
        self._pid = current_pid()
        self._shutting_down = False
        self._closing = False
        self._loop = asyncio.new_event_loop()
        #: What a task's code raises out of the loop, or its ``loop.stop()``: its
        #: attempt's failure (``escapes``); the pool stops the loop with its own stop.
        self._stop_loop = self._loop.stop
        self._escapes = Escapes(self._stop_loop)
        self._loop.stop = self._escapes.stop  # type: ignore[method-assign]
        #: Runs plain functions: not the loop's default executor, which a task may shut down
        self._calls = ThreadPoolExecutor(max_workers=size,  # one a slot: -c of them at once
                                         thread_name_prefix="minitask-asyncio-call")
        self._recording = RecordingThreads(self._loop, max(1, min(RECORDERS, size)), size)
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name="minitask-asyncio")
        self._thread.start()
        #: The attempt each running asyncio Task belongs to (task name, task id): its
        #: ``_run`` and, for a coroutine, the Task that awaits it. Read by the watch.
        self._holders: Dict[Optional["asyncio.Future[Any]"], Tuple[str, str]] = {}
        self._watch = LoopWatch(self._loop, lambda: [held[0] for held in list(
            self._holders.values())], functools.partial(holder, self._holders))

    def _serve(self) -> None:
        """Run the loop until ``close`` (``serve_loop``); then what serves it ends:
        no step can come any more, and the ones handed so far run before the
        recording threads end."""
        serve_loop(self._loop, self._escapes, lambda: self._closing,
                   lambda: ", ".join(sorted(self._attempts)) or "none")
        self._recording.close()
        self._calls.shutdown(wait=False)  # as loop.close() does its default one

    def submit(self, job: Job) -> None:
        self._loop.call_soon_threadsafe(self._start, job)

    def _start(self, job: Job, again: bool = False) -> "asyncio.Task[None]":
        """On the loop: run ``job`` in a task of its own, in its slot; again if a task's
        code cancels that task before its first step (or, the grace over, back)."""
        if again:
            logger.error("task %s: a task's code cancelled its attempt's asyncio task "
                         "before it began; it begins again", job.task_id)
        begun: List[bool] = []  # not the loop's create_task: see runner.spawn
        attempt = asyncio.Task(self._run(job, begun), loop=self._loop)
        attempt.add_done_callback(lambda _: begun or (
            asyncio.Task(self._hand_back(job), loop=self._loop) if self._shutting_down
            else self._start(job, again=True)))
        return attempt

    async def _hand_back(self, job: Job) -> None:
        try:
            await self._return(job)
        finally:
            self.give_back_slot()

    def on_loop(self, coro: Coroutine[Any, Any, Any]) -> Any:  # worker_process_init's
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    # -- ending ---------------------------------------------------------------------

    def cancel_running(self) -> None:
        """The grace is over: cancel the coroutines still running and wait for them to
        unwind; they record nothing, and the worker gives their tasks back."""
        self._shutting_down = True
        running = list(self._attempts.values()) + list(self.overruns.held)
        if not running:
            return
        for attempt in running:
            self._loop.call_soon_threadsafe(attempt.cancel)
        self.wait_idle(CANCEL_WAIT)

    def close(self) -> None:
        """Stop the loop, then (its thread, once it has stopped) the recording threads:
        while it runs (a task's code may block it past ``CANCEL_WAIT``) an attempt may
        still hand them a step, which must not be left unrun, awaited."""
        self._closing = True
        self._watch.stop()
        link = None if self._quick is None else self._quick.link
        if link is not None and self._thread.is_alive():
            try:  # its connections closed on the loop (bounded: a task may block it)
                asyncio.run_coroutine_threadsafe(link.close(), self._loop).result(CLOSE_WAIT)
            except Exception as exc:
                logger.debug("the asyncio pool's connections were not closed: %s", exc)
        self._loop.call_soon_threadsafe(self._stop_loop)
        self._thread.join(timeout=CANCEL_WAIT)
        if self._thread.is_alive():
            logger.error("the asyncio pool's event loop did not stop within %s s (a task's "
                         "code blocks it: %s); it and its recording threads end once it "
                         "stops", CANCEL_WAIT, ", ".join(sorted(self._attempts)) or "none")
            return
        self._loop.close()

    # -- one attempt, on the loop ---------------------------------------------------

    async def _run(self, job: Job, begun: List[bool]) -> None:
        """The slot's attempts, each leased as the last was recorded, in this one task:
        each its outcome recorded (``_execute``), and the slot's next job with it. (Not
        a coroutine an attempt: each awaited level costs every attempt twice more.)"""
        begun.append(True)
        current = asyncio.current_task()
        assert current is not None  # always inside a task on the loop
        following: Optional[Job] = job
        try:  # nothing may leave its lease held, which the heartbeat would renew for ever
            while following is not None and not self._shutting_down:
                if current.cancelling():  # one that came as the last attempt ended
                    await swallowed(current)
                    continue  # (the pool may be stopping: looked at again)
                job, following = following, None
                started = time.monotonic()
                self._attempts[job.task_id] = current
                try:
                    following = await self._execute(job, current)
                except asyncio.CancelledError:  # of minitask's, only the stop's gets here
                    if not self._shutting_down:  # a task's code cancelled it: its failure
                        following = await self._fail(job, None, started)
                except GeneratorExit:  # the loop closed with the attempt suspended
                    raise
                except BaseException as exc:  # a bug of ours (or a BaseException from
                    # code we call, a type's decode function): dead-lettered, as on the
                    # other pools
                    log_error(logger, logging.ERROR, "internal error while running task %s",
                              job.task_id, error=exc)
                    following = await self._fail(job, exc, started)
                finally:
                    self._attempts.pop(job.task_id, None)
                    self.ran_one()
                if self.overruns.held and current in self.overruns.held:
                    back, following = following, None  # given back once (hold())
                    await self.overruns.hold(current, back, self._return,
                                             lambda: self._shutting_down)
        finally:
            if following is not None:  # leased as the grace ran out: back at once
                await self._return(following)
            self.give_back_slot()

    async def _record(self, step: Callable[..., Any], *args: Any) -> Any:
        """Run ``step`` in a recording thread; its result. A cancel meanwhile does not
        abandon it: the attempt ends only once the step (its outcome) has, or the stop
        would give its lease back while its outcome is written. The stop's cancel
        (``cancel_running``) is then carried on; a task's code's is absorbed."""
        handed = self._recording.hand(functools.partial(step, *args))
        try:
            return await handed.future
        except asyncio.CancelledError:
            result, error = await outlast(handed)
            if not self._shutting_down:
                self._absorb()
                if error is not None:
                    raise error
                return result
            if error is None and isinstance(result, tuple) and isinstance(result[-1], Job):
                await self._return(result[-1])  # leased with the outcome: back at once
            raise

    def _absorb(self) -> None:
        """Forget a task's code's cancel of this task, handled (else ``acall`` sees it)."""
        task = asyncio.current_task()
        while not self._shutting_down and task is not None and task.uncancel() > 0:
            pass

    async def _fail(self, job: Job, error: Optional[BaseException], since: float) -> Any:
        """``_failed``, through any cancel (the stop's carried on); the slot's next job."""
        try:
            return await self._record(self._failed, job, error, time.monotonic() - since)
        except Exception as failed:  # logged; its lease is given back as the worker stops
            log_error(logger, logging.ERROR, "could not record the failure of task %s",
                      job.task_id, error=failed)
            return None

    def _failed(self, job: Job, error: Optional[BaseException], took: float) -> Optional[Job]:
        """In a recording thread: ``error`` (ours) dead-letters the attempt; None (a
        task's code cancelled it) fails it by its task's options. Its slot's next job."""
        found = None if error else self._runner.resolve(job)  # (dead-lettered if none)
        if error is not None:  # named by its message, unless that cannot be read
            self._recorder.bury(job, decoded(job), error, "internal error while handling it")
        elif found is not None:
            (message, task), observer = found, self._runner.observer
            observer.ending(message)
            status, error = self._recorder.finish(job, message, None,
                                                  cancelled_by_code(task.name), took)
            observer.ended(None, message, status, None, error, took)
        return self._next()

    async def _return(self, job: Job) -> None:  # a job leased that will not run: back
        await outlast(self._recording.hand(functools.partial(self._give_back, job)))

    async def _execute(self, job: Job, outer: "asyncio.Task[None]") -> Optional[Job]:
        """Run one attempt (in ``outer``, the slot's asyncio task) and record its
        outcome; the next job, leased as it was recorded, to run in its slot (None:
        the slot goes back)."""
        found = self._runner.resolve(job, bury=False)
        if found is None:  # dead-lettered, off the loop
            await self._record(self._runner.resolve, job)
            return None
        message, task = found
        arguments = self._runner.arguments(job, message, task, bury=False)
        if arguments is None:  # dead-lettered, off the loop
            await self._record(self._runner.arguments, job, message, task)
            return None
        args, kwargs = arguments
        board = self._runner.cancels
        func = task.func
        is_async = self._coroutine_functions.get(func)
        if is_async is None:  # (inspect's look-up costs more than the dict's)
            is_async = self._coroutine_functions[func] = inspect.iscoroutinefunction(func)
        cancel = board.enter(job.task_id)
        held = self._holders[outer] = (task.name, job.task_id)
        if len(self._holders) == 1:  # the first attempt since the pool was idle
            self._watch.wake()
        inner: "Optional[asyncio.Future[Any]]" = None
        left: "List[asyncio.Future[Any]]" = []  # a coroutine that outlived its cancel
        watched: Optional[TaskContext] = None  # what escapes the loop from its code: its
        try:
            if cancel.is_set():  # asked to stop while it waited in this worker's buffer
                await self._record(self._recorder.cancelled, job, message, 0.0)
                return None
            started = time.monotonic()
            value: Any = None
            error: Optional[BaseException] = None
            limit = task.options.timeout
            observer = self._runner.observer
            with running(message, job.delivery.delivery, cancel,
                         observer.reporter(message)) as context:
                observer.started(context, message)
                self._escapes.enter(context, None)  # (its prerun hooks' code is its too)
                watched = context
                hooks = self._hooks  # (``added`` first: no call a task without hooks)
                if hooks.added:
                    if hooks.wants("task_prerun"):
                        await hooks.acall("task_prerun", context)
                    if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != self._pid:
                        leave_if_forked(self._pid)  # (a task_start or task_prerun hook's copy)
                if cancel.is_set():  # asked to stop during its prerun hooks
                    inner = unbegun(self._loop)
                elif is_async:
                    soft = task.options.soft_timeout
                    coro = contained(task.func(*args, **kwargs))
                    inner = begun(coro if limit is None and soft is None else
                                  limited(coro, limit, task.name, soft, left, functools.partial(
                                      hold, self._holders, held)), self._loop, self._holders,
                                  held, outer)
                else:  # the context goes along, for current_task()
                    call = functools.partial(contextvars.copy_context().run, contained_call,
                                             task.func, task.options.soft_timeout, task.name,
                                             *args, **kwargs)
                    inner = self._loop.run_in_executor(self._calls, call)
                self._escapes.enter(context, inner)
            # the cancel watch (another thread) stops an attempt: cancelled on the loop
            if is_async and not board.set_stopper(job.task_id, functools.partial(
                    self._loop.call_soon_threadsafe, inner.cancel)):
                inner.cancel()  # the request came in as it started
            try:
                value = await shielded(inner)
            except asyncio.CancelledError:
                if not inner.cancelled():  # this attempt's own task was cancelled
                    if not await settle(inner):  # the attempt goes too
                        left.append(inner)
                    if self._shutting_down:
                        raise
                self._absorb()
                if not cancel.is_set():  # a task's code cancelled it: a failure
                    error = cancelled_by_code(task.name)
            except Exception as exc:  # the time limit; the task's own come as Raised
                error = exc
            if left:  # said once; its slot is held for it once its outcome is recorded
                self.overruns.left(outer, task.name, job.task_id, left[0], cancel.is_set(), limit)
            if isinstance(value, Raised):
                value, error = None, value.error
            escaped = self._escapes.leave(context)  # raised out of the loop by code it started
            watched = None  # (left: nothing is kept for it from now on)
            if escaped is not None:  # (its child task, its callback), or its loop.stop()
                value, error = None, escaped
            duration = time.monotonic() - started
            quick = self._quick
            concluded: Tuple[str, Optional[BaseException], Optional[Job]]
            if (quick is not None and error is None and not cancel.is_set()
                    and (limit is None or duration <= limit) and quick.takes(message)):
                concluded = await self._on_loop(quick, job, message, context, cancel, limit,
                                                value, duration)
            else:  # one hop off the loop: the outcome, and the next job with it
                concluded = await self._record(self._conclude, job, message, context, cancel,
                                               limit, value, error, duration)
            status, error, following = concluded
            try:
                await observer.apostrun(context, status, value, error)
            except asyncio.CancelledError:  # its outcome stands; ``following`` runs (or
                pass  # goes back, as the pool stops): never left leased
            if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != self._pid:
                leave_if_forked(self._pid)  # (a task_postrun hook's copy)
            return following
        finally:
            board.leave(job.task_id, cancel)
            if watched is not None:
                self._escapes.leave(watched)
            self._holders.pop(outer, None)
            if inner is not None:
                self._holders.pop(inner, None)

    async def _on_loop(self, quick: "LoopAcks", job: Job, message: Message,
                       context: TaskContext, cancel: threading.Event, limit: Optional[float],
                       value: Any, duration: float
                       ) -> Tuple[str, Optional[BaseException], Optional[Job]]:
        """``_conclude`` of a plain success, from the loop (``LoopAcks``): no hop unless
        its outcome waits with others and the buffer runs dry, or the round trip fails
        (then a recording thread records it, through outages, as ``_conclude`` would)."""
        try:
            fetch = self._recorder.put_aside(job, message, value, duration)
        except BaseException:  # the app's code encoding it: its failure, recorded off it
            concluded: Tuple[str, Optional[BaseException], Optional[Job]] = await self._record(
                self._conclude, job, message, context, cancel, limit, value, None, duration)
            return concluded
        self._runner.observer.ended(context, message, "succeeded", value, None, duration)
        if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != self._pid:
            leave_if_forked(self._pid)  # (a task_success hook's copy): before any round trip
        if fetch is None:  # put aside with more buffered: the next one of them
            following = None if self._shutting_down else quick.next_job()
            if following is None:
                following = await self._record(self._next)
        elif not fetch:  # the worker stops, or tasks left: recorded with no fetch
            following = await self._record(self._then_next, self._recorder.record_waiting, False)
        else:
            answer = await quick.record()
            following = answer.job
            if answer.how == "next":
                following = await self._record(self._next)
            elif answer.how == "flush":
                following = await self._record(self._then_next, self._recorder.record_waiting,
                                               True)
            elif answer.how == "take":
                following = await self._record(self._then_next, quick.take, answer.result)
            if answer.cancelled:  # as ``_record`` carries a cancel on, the outcome recorded
                if self._shutting_down:
                    if following is not None:
                        await self._return(following)
                    raise asyncio.CancelledError
                self._absorb()
        return "succeeded", None, following

    def _then_next(self, step: Callable[..., Any], *args: Any) -> Optional[Job]:
        step(*args)  # (in a recording thread) then the slot's next job
        return self._next()

    def _conclude(self, job: Job, message: Message, context: TaskContext,
                  cancel: threading.Event, limit: Optional[float], value: Any,
                  error: Optional[BaseException], duration: float
                  ) -> Tuple[str, Optional[BaseException], Optional[Job]]:
        """In a recording thread, once an attempt has ended: record its outcome, and
        lease the next job (``follow_on``); its status, its error, and that job."""
        observer = self._runner.observer
        observer.ending(message)  # its progress, cancelled or not
        if cancel.is_set():
            self._recorder.cancelled(job, message, duration)
            return "cancelled", error, self._next()
        if error is None and limit is not None and duration > limit:
            # a plain function cannot be stopped; a coroutine that blocked the loop
            # past its limit ended before the limit could be checked
            error = TimeLimitExceeded(f"task {message.task!r} ran {duration:.3f} s, over "
                                      f"its timeout of {limit} s")
        status, error = self._recorder.finish(job, message, value, error, duration)
        observer.ended(context, message, status, value, error, duration)
        return status, error, self._next()

    def _next(self) -> Optional[Job]:
        """In a recording thread: the next job for the slot, unless the pool is
        shutting down (a job leased now would wait, leased, for nobody). A copy a
        hook forked as the outcome was recorded ends first: it leases nothing."""
        if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != self._pid:
            leave_if_forked(self._pid)
        return None if self._shutting_down else self._follow_on()
