"""The end of a worker's process: threads its tasks left running do not keep it alive.

Python's exit joins every thread that is not a daemon, with no limit, and every
thread of a ``concurrent.futures`` executor, daemon or not (a loop's default
one, behind ``run_in_executor(None, ...)`` and ``asyncio.to_thread``): a task
that left a call running there, or started a thread of its own, kept a worker
that had logged "stopped" alive past its grace, for as long as that call ran
(issue 29); so did a plain task of the asyncio pool running past the grace, in
the pool's executor.
Once the worker's own work is done, such threads get ``EXIT_WAIT`` seconds;
then one warning names those still running, and the process ends without
waiting for them (``os._exit``, after flushing the logs and standard streams:
``atexit`` functions do not run then).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from concurrent.futures import thread as _executor_threads
from typing import Any, List, Optional, Set

from ..printable import own_logger

logger = own_logger(__name__)

#: Seconds the threads a task left running (not daemons) get to end once the worker
#: has stopped, before the process ends without them.
EXIT_WAIT = 1.0
#: Coroutines tasks left running past their cancel: the asyncio pool's until they end
#: (``pools.overruns``), those an attempt's own loop abandoned (``coroutine_runs``)
#: for good. Kept from the collector, and the process ends without closing them.
KEPT: Set[Any] = set()
#: Coroutines kept (``KEPT``) past which a process says so (``kept_too_many``): those an
#: attempt's loop abandoned never end (the loop is closed), and each holds its memory
#: until the process ends, since collecting one could spin for ever. A process pool's
#: child then ends between tasks and another replaces it; a thread pool's worker says it
#: once (restart it).
KEPT_MOST = 100
_kept_said = [False]


def kept_too_many(say: bool = False) -> Optional[str]:
    """Why this process should end, or None: it keeps ``KEPT_MOST`` coroutines or more.
    With ``say``, one ERROR says so (once a process): a worker that cannot end it."""
    if len(KEPT) < KEPT_MOST:
        return None
    why = (f"it keeps {len(KEPT)} coroutine(s) its tasks left running past their cancel "
           f"(at most {KEPT_MOST}: each holds its memory until the process ends)")
    if say and not _kept_said[0]:
        _kept_said[0] = True
        logger.error("this worker's process (pid %d): %s; a task that ignores its cancel "
                     "keeps doing so: fix it, and restart the worker (the process pool "
                     "replaces such a child itself)", os.getpid(), why)
    return why


def leftover_threads() -> List[threading.Thread]:
    """The live threads an exit would wait for, but this one and the main thread: those
    that are not daemons, and every executor's, daemons too (an executor made in a
    daemon thread has daemon threads, which ``concurrent.futures`` joins at exit all
    the same: it keeps them in a private table, read here, never changed)."""
    spared = (threading.main_thread(), threading.current_thread())
    executors = set(getattr(_executor_threads, "_threads_queues", {}))
    return [thread for thread in threading.enumerate()
            if thread not in spared and (not thread.daemon or thread in executors)
            and thread.is_alive()]


def exit_past_leftovers(code: int, wait: float = EXIT_WAIT) -> None:
    """Return once no leftover thread is alive, within ``wait`` seconds, and no coroutine
    was left running (``KEPT``); else log one warning naming them and end the process
    at once with exit code ``code``."""
    end = time.monotonic() + wait
    for thread in leftover_threads():
        thread.join(max(0.0, end - time.monotonic()))
    alive = leftover_threads()
    if not alive and not KEPT:
        return
    if KEPT:
        logger.warning("this process (pid %d) has stopped, but %d coroutine(s) its tasks left "
                       "running past their cancel were never closed (closing one that takes "
                       "every exception never ends); it exits without closing them",
                       os.getpid(), len(KEPT))
    if alive:
        logger.warning("this process (pid %d) has stopped, but %d thread(s) that its exit would "
                       "wait for still run %s s later: %s (a call its tasks left in an executor, "
                       "as loop.run_in_executor(None, ...) and asyncio.to_thread make, a plain "
                       "task of the asyncio pool still running after the grace, or a thread a "
                       "task started that is not a daemon); it exits without waiting for them",
                       os.getpid(), len(alive), wait, _named(alive))
    try:
        logging.shutdown()  # flushes every handler
    except Exception:  # noqa: S110 - a handler of the app's whose flush or close raises
        pass  # must not keep this process from exiting
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: S110 - closed, or a pipe whose reader has gone
            pass
    os._exit(code)


__all__ = ["EXIT_WAIT", "KEPT_MOST", "exit_past_leftovers", "kept_too_many", "leftover_threads"]


#: Threads a leftover warning names; the rest are counted (a task starting a thread at
#: every call left hundreds).
NAMED_MOST = 10


def _named(threads: List[threading.Thread]) -> str:
    names = ", ".join(thread.name for thread in threads[:NAMED_MOST])
    more = len(threads) - NAMED_MOST
    return names if more <= 0 else f"{names} and {more} more"
