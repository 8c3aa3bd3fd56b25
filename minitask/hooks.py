"""Hooks: user functions the worker calls as attempts start and end.

A hook sees an attempt, it never steers it: it runs after the outcome is
recorded (before the attempt, for ``task_start``), and whatever it raises is
logged and dropped.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List

from .errors import ConfigurationError

logger = logging.getLogger(__name__)

#: The events, and what each hook is called with after the task context:
#: task_start (nothing), task_success (the value), task_retry, task_failure and
#: task_dead (the exception). task_failure hears of every attempt that raised,
#: retried or not; task_retry of those another attempt follows; task_dead of
#: tasks that went to the dead letters.
EVENTS = ("task_start", "task_success", "task_retry", "task_failure", "task_dead")

Hook = Callable[..., Any]


class Hooks:
    """The hooks of one app, by event, in the order they were added."""

    def __init__(self) -> None:
        self._hooks: Dict[str, List[Hook]] = {event: [] for event in EVENTS}

    def add(self, event: str, fn: Hook) -> None:
        if event not in self._hooks:
            raise ConfigurationError(f"no hook event is named {event!r}; the events are "
                                     f"{', '.join(EVENTS)}")
        if not callable(fn):
            raise ConfigurationError(f"a hook for {event!r} must be callable, got {fn!r}")
        self._hooks[event].append(fn)

    def __bool__(self) -> bool:
        return any(self._hooks.values())

    def call(self, event: str, *args: Any) -> None:
        """Call the hooks of ``event``; one that raises is logged, the others still run."""
        for fn in self._hooks[event]:
            try:
                fn(*args)
            except Exception:
                logger.exception("hook %s for %s raised; the task's outcome stands",
                                 getattr(fn, "__qualname__", fn), event)
