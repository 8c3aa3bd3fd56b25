"""Hooks: user functions the worker calls around attempts and its own life.

A hook sees an attempt, it never steers it: the task hooks run after the
outcome is recorded (before the attempt, for ``task_start`` and
``task_prerun``), and whatever they raise is logged and dropped. The one hook
whose failure counts is ``worker_process_init``: a process or thread whose set-up
failed takes no work (``init`` says why).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable, Dict, List, Optional

from .errors import ConfigurationError
from .printable import error_text, log_error, own_logger

logger = own_logger(__name__)

#: The events, and what each hook is called with. Task events, after the task
#: context: task_start and task_prerun (nothing), task_success (the value),
#: task_retry, task_failure and task_dead (the exception), task_postrun (the
#: status, as ``handle.status()`` names it: "succeeded", "retrying", "failed" or
#: "cancelled", then the value, or the exception when it raised, else None).
#: task_failure hears of every attempt that raised, retried or not; task_retry of
#: those another attempt follows; task_dead of tasks that went to the dead
#: letters. Worker events get the ``Worker``: worker_process_init (in each pool
#: child or thread, or once on the asyncio pool's loop, before any task),
#: worker_ready (it serves), worker_shutdown (it stopped, after the grace).
EVENTS = ("task_start", "task_success", "task_retry", "task_failure", "task_dead",
          "worker_process_init", "worker_ready", "worker_shutdown", "task_prerun",
          "task_postrun")
#: The events an ``async def`` hook may have: the asyncio pool awaits them on its loop.
ASYNC_EVENTS = ("worker_process_init", "task_prerun", "task_postrun")

Hook = Callable[..., Any]


class Hooks:
    """The hooks of one app, by event, in the order they were added."""

    def __init__(self) -> None:
        self._hooks: Dict[str, List[Hook]] = {event: [] for event in EVENTS}
        #: hooks of any event (none is ever removed): read by a worker at each task,
        #: where a call to ask (``bool(hooks)``) would cost more than the answer
        self.added = 0

    def add(self, event: str, fn: Hook) -> None:
        if event not in self._hooks:
            raise ConfigurationError(f"no hook event is named {event!r}; the events are "
                                     f"{', '.join(EVENTS)}")
        if not callable(fn):
            raise ConfigurationError(f"a hook for {event!r} must be callable, got {fn!r}")
        if inspect.iscoroutinefunction(fn) and event not in ASYNC_EVENTS:
            raise ConfigurationError(f"the hook {_name(fn)} for {event!r} is an async def "
                                     f"function; only {', '.join(ASYNC_EVENTS)} hooks may "
                                     f"be (the asyncio pool awaits them): make it a plain "
                                     f"function")
        self._hooks[event].append(fn)
        self.added += 1

    def __bool__(self) -> bool:
        return self.added > 0

    def wants(self, event: str) -> bool:
        """Whether ``event`` has a hook: without one, a caller skips what it would set
        up for the call (a worker asks twice a task)."""
        return bool(self._hooks[event])

    def check_pool(self, pool: str) -> None:
        """Refuse ``async def`` hooks on a pool that has no event loop to await them."""
        if pool == "asyncio":
            return
        found = [f"{_name(fn)} ({event})" for event in ASYNC_EVENTS
                 for fn in self._hooks[event] if inspect.iscoroutinefunction(fn)]
        if found:
            raise ConfigurationError(f"async def hooks run only on the asyncio pool, not on "
                                     f"the {pool} pool: {', '.join(found)}; make them plain "
                                     f"functions or use --pool asyncio")

    def call(self, event: str, *args: Any) -> None:
        """Call the hooks of ``event``; one that raises is logged, the others still run.

        A ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``) too: raised in a
        pool's thread or child it would end it with the attempt's message leased.
        """
        for fn in self._hooks[event]:
            try:
                fn(*args)
            except BaseException as exc:
                _log_failure(fn, event, exc)

    async def acall(self, event: str, *args: Any) -> None:
        """``call``, awaiting the ``async def`` hooks (on the asyncio pool's loop)."""
        for fn in self._hooks[event]:
            try:
                if inspect.iscoroutinefunction(fn):
                    await fn(*args)
                else:
                    fn(*args)
            except BaseException as exc:
                if _cancelled():  # the pool stops this attempt: not the hook's doing
                    raise
                _log_failure(fn, event, exc)

    def init(self, *args: Any) -> Optional[str]:
        """Run the ``worker_process_init`` hooks in order, up to the first that raises
        (logged with its traceback); returns why it failed, or None."""
        for fn in self._hooks["worker_process_init"]:
            try:
                fn(*args)
            except BaseException as exc:
                return _init_failed(fn, exc)
        return None

    async def ainit(self, *args: Any) -> Optional[str]:
        """``init`` on the asyncio pool's loop, awaiting ``async def`` hooks."""
        for fn in self._hooks["worker_process_init"]:
            try:
                if inspect.iscoroutinefunction(fn):
                    await fn(*args)
                else:
                    fn(*args)
            except BaseException as exc:
                if _cancelled():
                    raise
                return _init_failed(fn, exc)
        return None


def _cancelled() -> bool:
    """Whether the running asyncio task was asked to stop (by ``cancel()``)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _name(fn: Hook) -> str:
    return str(getattr(fn, "__qualname__", fn))


def _log_failure(fn: Hook, event: str, exc: BaseException) -> None:
    """Say that a hook raised, with its traceback bounded (``log_error``)."""
    said = "" if event.startswith("worker_") else "; the task's outcome stands"
    log_error(logger, logging.ERROR, "hook %s for %s raised%s", _name(fn), event, said,
              error=exc)


def _init_failed(fn: Hook, exc: BaseException) -> str:
    why = (f"the worker_process_init hook {_name(fn)} raised {type(exc).__name__}: "
           f"{error_text(exc)}")
    log_error(logger, logging.ERROR, "%s", why, error=exc)
    return why
