"""What an asyncio pool attempt's code raises, carried past asyncio as a value.

asyncio re-raises ``KeyboardInterrupt`` and ``SystemExit`` out of the event loop
(ending every attempt on it); a ``BaseException`` from a task is its attempt's
failure, so the pool's awaits see it as ``Raised``, never raised.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
from typing import Any, Callable, Coroutine, Dict, Optional, Tuple

from ...errors import SoftTimeLimitExceeded
from ..forks import FORK_MARK, PID_SEEN, current_pid, leave_if_forked
from ..softlimit import call_with_posting

#: Python 3.12+ starts an asyncio task eagerly when asked: its first step runs at once,
#: and a coroutine that ends without waiting (a no-op) costs no loop turn, twice (its
#: step, then its end's callback). On 3.11 ``begun`` does the same by hand.
EAGER: Dict[str, Any] = {"eager_start": True} if sys.version_info >= (3, 12) else {}
if not EAGER:  # asyncio's own, private: only 3.11's begun() by hand needs them
    from asyncio.tasks import _enter_task, _leave_task


class Raised:
    """What the task's code raised, carried as a value past asyncio's machinery, which
    re-raises ``KeyboardInterrupt`` and ``SystemExit`` out of the event loop (ending
    every attempt on it); a ``BaseException`` from a task is its attempt's failure."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def contained(coro: Coroutine[Any, Any, Any]) -> Any:
    """Await an ``async def`` task's coroutine; what it raises comes back as ``Raised``
    (cancellation stays cancellation). A CancelledError the task's code raises while
    nothing cancelled its asyncio task (``cancelling()`` 0) is no cancellation: it is
    that attempt's failure, recorded as CancelledError, as on the other pools. In a
    copy of this process that the task's code forked, it leaves as that code ends
    (``forks``), before the loop runs anything more."""
    # (read before the task's code begins: awaiting it begins it; inline, ``forks``)
    pid = PID_SEEN[0] if FORK_MARK is not None and FORK_MARK[0] else current_pid()
    try:
        value = await coro
    except asyncio.CancelledError as exc:
        leave_if_forked(pid, exc)
        task = asyncio.current_task()
        if isinstance(exc, SoftTimeLimitExceeded) or task is None or task.cancelling():
            raise  # minitask's cancel, a time limit, the pool stopping, the soft limit
        return Raised(exc)
    except BaseException as exc:  # KeyboardInterrupt, SystemExit, any of the task's own
        leave_if_forked(pid, exc)
        return Raised(exc)
    if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
        leave_if_forked(pid)
    return value


def contained_call(func: Callable[..., Any], soft: Optional[float], name: str,
                   *args: Any, **kwargs: Any) -> Any:
    """Call a plain task's function (in the pool's executor) as ``contained`` awaits,
    with its soft limit (``soft`` seconds) raised in its thread; a copy of this process
    the function forked leaves as it returns or raises."""
    pid = PID_SEEN[0] if FORK_MARK is not None and FORK_MARK[0] else current_pid()
    try:
        if soft is not None:
            value = call_with_posting(func, args, kwargs, soft, name)
        else:
            value = func(*args, **kwargs)
    except BaseException as exc:  # as in contained(): the attempt's failure
        leave_if_forked(pid, exc)
        return Raised(exc)
    if FORK_MARK is None or not FORK_MARK[0] or PID_SEEN[0] != pid:
        leave_if_forked(pid)
    return value


async def swallowed(task: "asyncio.Task[Any]") -> None:
    """Take a cancel of the pool's ``task`` that came as its slot's attempt ended (a
    task's code cancelled the pool's tasks): it ended that attempt's asyncio task when
    each attempt had one, and is no failure of the slot's next attempt."""
    try:
        await asyncio.sleep(0)  # (raises it if it is still to come)
    except asyncio.CancelledError:
        pass
    while task.uncancel() > 0:
        pass


async def shielded(inner: "asyncio.Future[Any]") -> Any:
    """``await asyncio.shield(inner)`` for less: a cancel of the caller's task leaves
    ``inner`` running; one future and one callback a task, not two of each and two
    closures (an attempt's no-op coroutine cost less than its shield)."""
    if not inner.done():
        waiter = inner.get_loop().create_future()
        inner.add_done_callback(functools.partial(_wake, waiter))
        await waiter
    return inner.result()


def _wake(waiter: "asyncio.Future[None]", inner: "asyncio.Future[Any]") -> None:
    if not waiter.done():
        waiter.set_result(None)
    elif not inner.cancelled():  # its caller was cancelled: its end seen all the same
        inner.exception()


def begun(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop,
          holders: Dict[Any, Tuple[str, str]], held: Tuple[str, str],
          caller: "Optional[asyncio.Task[Any]]" = None) -> "asyncio.Task[Any]":
    """An attempt's coroutine in an asyncio task of its own, begun at once (``EAGER``;
    on 3.11 ``_begun_now``), made directly, not by the loop's task factory (``runner.spawn``);
    ``holders`` names it ``held`` from its first step on (for the loop's watch: a first
    step that blocks the loop is named too); ``caller``: the task running now, if
    the caller knows it (one look-up less)."""
    holders[None] = held  # the task about to be: its first step, if eager
    try:
        if EAGER:
            task = asyncio.Task(coro, loop=loop, **EAGER)
        else:
            task = _begun_now(coro, loop, caller)
    finally:
        holders.pop(None, None)
    holders[task] = held
    return task


def _begun_now(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop,
               caller: "Optional[asyncio.Task[Any]]" = None) -> "asyncio.Task[Any]":
    """Python 3.11's form of ``eager_start``: the task's first step, which asyncio has
    just put on the loop's ready queue, taken off it and run at once, as its task (the
    caller's task left meanwhile, as 3.12 does). A coroutine that ends without waiting
    costs no loop turn, nor its end's callback one more. On a loop other than asyncio's
    own (no ready queue to find the step in), the step waits its turn as before."""
    context = contextvars.copy_context()
    task = asyncio.Task(coro, loop=loop, context=context)
    ready = getattr(loop, "_ready", None)
    if caller is None:
        caller = asyncio.current_task(loop)
    if ready is None or caller is None:
        return task
    # the step just queued, by its context (another thread may queue a call meanwhile)
    for index in range(len(ready) - 1, -1, -1):
        step = ready[index]
        if getattr(step, "_context", None) is context:
            break
    else:
        return task
    del ready[index]
    _leave_task(loop, caller)
    try:
        step._run()
    finally:
        _enter_task(loop, caller)
    return task


def unbegun(loop: asyncio.AbstractEventLoop) -> "asyncio.Future[Any]":
    """An attempt whose cancel came during its task_prerun hooks: its code never begins
    (with ``EAGER`` its first step, or its whole body, ran before the cancel could reach
    it), and it ends cancelled, as if cancelled before its first step."""
    future = loop.create_future()
    future.cancel()
    return future


def hold(holders: Dict[Any, Tuple[str, str]], held: Tuple[str, str],
         task: "asyncio.Task[Any]") -> None:
    """``task``, the asyncio task ``runner.limited`` runs an attempt's code in, is that
    attempt's (``held``), for the loop's watch: its code blocking the loop is named, as
    without a time limit, until it ends (one left running past its limit, too)."""
    holders[task] = held
    task.add_done_callback(functools.partial(_unhold, holders))


def _unhold(holders: Dict[Any, Tuple[str, str]], task: "asyncio.Task[Any]") -> None:
    holders.pop(task, None)


def holder(holders: Dict[Any, Tuple[str, str]], task: Any) -> Optional[Tuple[str, str]]:
    """Which attempt ``task`` runs (name, id), or the one whose task begins now."""
    return holders.get(task) or holders.get(None)
