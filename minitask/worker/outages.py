"""Riding out Redis outages: every Redis step of the worker goes through here.

A step that reads (fetch, wait) gives up when a stop is asked; a step that
writes an outcome goes on until it succeeds, or the outcome would be lost.
One that Redis wrote but replicas did not confirm (``durability``) is not
written again: a replica that stays down would hold the worker for ever.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable, Set

from ..errors import BrokerError, DurabilityError

logger = logging.getLogger(__name__)

#: Longest pause between reconnection attempts while Redis is away.
MAX_BACKOFF = 5.0
#: What ``persist`` returns for a write Redis made but replicas did not confirm.
UNCONFIRMED = object()


class _Outage:
    """Redis away, as this process sees it: the first step to lose it says so, and the
    last to get it back; the worker's other threads (heartbeat, cancel watch, orders)
    ride the same outage quietly, so one outage is one ERROR and one WARNING."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting = 0       # steps riding it out now
        self._since = 0.0

    def lost(self, what: str, exc: BaseException) -> None:
        with self._lock:
            first = self._waiting == 0
            self._waiting += 1
            if first:
                self._since = time.monotonic()
        if first:
            logger.error("lost Redis while trying to %s: %s; retrying with backoff", what, exc)
        else:
            logger.debug("lost Redis too while trying to %s: %s", what, exc)

    def back(self, what: str, failures: int) -> None:
        with self._lock:
            self._waiting -= 1
            last = self._waiting == 0
            lasted = time.monotonic() - self._since
        if last:
            logger.warning("Redis is back after %.1f s (%s, after %d failed tries)", lasted,
                           what, failures)
        else:
            logger.debug("Redis is back for %s after %d failed tries", what, failures)

    def left(self) -> None:
        """A step gave up waiting (its worker stops): it no longer rides the outage."""
        with self._lock:
            self._waiting -= 1


_OUTAGE = _Outage()


class Backoff:
    """Capped exponential backoff with full jitter; logs only when the state changes."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0
        self._unreachable = False

    def failed(self, exc: BaseException) -> float:
        if self.failures == 0:
            if getattr(exc, "reason", "unreachable") == "unreachable":
                self._unreachable = True
                _OUTAGE.lost(self.what, exc)
            else:  # Redis answered, with a refusal: say what it is, not "lost Redis"
                logger.error("Redis refused to %s: %s; retrying with backoff", self.what, exc)
        self.failures += 1
        return random.uniform(0, min(MAX_BACKOFF, 0.05 * 2 ** self.failures))

    def succeeded(self) -> None:
        if self._unreachable:
            _OUTAGE.back(self.what, self.failures)
        elif self.failures:
            logger.warning("Redis is back (%s) after %d failed tries", self.what, self.failures)
        self.failures = 0
        self._unreachable = False

    def gave_up(self) -> None:
        """The step stops waiting without Redis coming back (its worker stops)."""
        if self._unreachable:
            _OUTAGE.left()
        self.failures = 0
        self._unreachable = False


def beat_step(step: Callable[[], Any], refusals: Set[str]) -> None:
    """Run a step of a worker's heartbeat: an outage is raised (the heartbeat backs
    off), a refusal logged once (``refusals``: those said) and the other steps go on."""
    try:
        step()
    except BrokerError as exc:
        if exc.reason == "unreachable":
            raise
        if str(exc) not in refusals:
            refusals.add(str(exc))
            logger.error("heartbeat: %s; its other steps go on", exc)


def guarded(step: Callable[[], Any], what: str, stop: threading.Event) -> Any:
    """Run a Redis step, riding out outages with backoff instead of crashing;
    None once ``stop`` is set while Redis is away."""
    backoff = Backoff(what)
    while True:
        try:
            result = step()
        except BrokerError as exc:
            pause = backoff.failed(exc)
            if stop.wait(pause):
                backoff.gave_up()
                return None
            continue
        backoff.succeeded()
        return result


def persist(step: Callable[[], Any], what: str) -> Any:
    """Run a step that writes an outcome until it succeeds, backing off while Redis is
    away; unlike ``guarded``, a stop does not end it. Returns the step's value, or
    UNCONFIRMED (logged) when replicas did not confirm the write in time."""
    backoff = Backoff(what)
    while True:
        try:
            result = step()
        except DurabilityError as exc:
            unconfirmed(what, exc)
            return UNCONFIRMED
        except BrokerError as exc:
            time.sleep(backoff.failed(exc))
            continue
        backoff.succeeded()
        return result


def unconfirmed(what: str, exc: BaseException) -> None:
    """Say that a worker's write is on the primary only (at least once still holds)."""
    logger.error("Redis wrote but replicas did not confirm it in time: %s (%s); a failover "
                 "may lose it, and the task then runs again", what, exc)
