"""A task that forks: the forked copy of the worker ends as it leaves the task's code.

``pid = os.fork(); if pid == 0: work(); sys.exit(0)`` (then ``os.waitpid`` in the
parent) is a common way to run work in a process of its own. The child is a copy of
the worker down to the frames that called the task: minitask's code in it went on as
the worker's (it took the child's ``SystemExit`` for the attempt's failure, or
recorded a second outcome, and served tasks on), and never exited, so the parent
waited for it for ever (issue 29). Whatever runs right after a task's code compares
this process's id with the one read as the attempt began and, in a copy, leaves at
once with ``os._exit``: no Redis, no record, no hook, no buffer flushed.

Every task pays that check (issue 36: each call a task is the GIL held longer), so
the hot paths make it inline, with no Python call, from the fork mark
(``broker.connections``): ``pid = PID_SEEN[0] if FORK_MARK is not None and
FORK_MARK[0] else current_pid()`` reads this process's id, and
``if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
leave_if_forked(pid, error)`` leaves a copy. A fork wipes the mark in the copy (and
a reading there since puts the copy's own id in ``PID_SEEN``): only the process
``pid`` passes over the call.
"""
from __future__ import annotations

import os
from typing import Any, Coroutine, NoReturn, Optional

from ..broker.connections import FORK_MARK, PID_SEEN, current_pid
from ..printable import error_trace, printable

__all__ = ["FORK_MARK", "PID_SEEN", "current_pid", "exit_code", "guarded", "leave",
           "leave_if_forked"]


def leave_if_forked(pid: int, error: Optional[BaseException] = None) -> None:
    """End this process at once unless it is ``pid``, the one that began the attempt:
    a copy that code run since forked, leaving that code by a return (``error`` None)
    or by raising ``error``. A memory read in the worker itself (``current_pid``)."""
    if current_pid() != pid:
        leave(error)


async def guarded(coro: Coroutine[Any, Any, Any], pid: int) -> Any:
    """Await an ``async def`` task's coroutine; in a copy of process ``pid`` its code
    forked, leave as it ends, before the event loop runs anything more."""
    try:
        value = await coro
    except BaseException as exc:  # noqa: B902 - the copy's SystemExit too
        leave_if_forked(pid, exc)
        raise
    leave_if_forked(pid)
    return value


def exit_code(error: Optional[BaseException]) -> int:
    """The code a process leaving a task's code this way exits with, as Python's own
    exit would: 0 for a return, ``SystemExit``'s code when it is an int (0 for None),
    else 1."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        code = error.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF  # what the system keeps of it (never too big to pass)
    return 1


def leave(error: Optional[BaseException]) -> NoReturn:
    """Exit now with ``exit_code(error)``; an exception (or a ``SystemExit`` whose code
    is a text) is written to stderr first, escaped, as Python's exit would show it.
    Written with ``os.write``: a lock another thread of the worker held as the fork
    came (the log's, ``sys.stderr``'s) is held for ever in the copy."""
    code = 1
    try:
        code = exit_code(error)
        if error is not None and not (isinstance(error, SystemExit) and (
                error.code is None or isinstance(error.code, int))):
            _say(error)
    finally:
        os._exit(code)


def _say(error: BaseException) -> None:
    try:
        if isinstance(error, SystemExit):  # sys.exit("a text")
            shown = printable(error.code) + "\n"
        else:
            shown = error_trace(error)
        os.write(2, (f"minitask: process {os.getpid()}, forked by a task's code, left "
                     f"it with exit code 1:\n{shown}").encode("utf-8", "backslashreplace"))
    except BaseException:  # noqa: B902 - the app's code (an exception's __str__): the
        pass  # exit matters, not the text
