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
from typing import Any, Callable

from ..errors import BrokerError, DurabilityError

logger = logging.getLogger(__name__)

#: Longest pause between reconnection attempts while Redis is away.
MAX_BACKOFF = 5.0
#: What ``persist`` returns for a write Redis made but replicas did not confirm.
UNCONFIRMED = object()


class Backoff:
    """Capped exponential backoff with full jitter; logs only when the state changes."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        if self.failures == 0:
            if getattr(exc, "reason", "unreachable") == "unreachable":
                logger.error("lost Redis while trying to %s: %s; retrying with backoff",
                             self.what, exc)
            else:  # Redis answered, with a refusal: say what it is, not "lost Redis"
                logger.error("Redis refused to %s: %s; retrying with backoff", self.what, exc)
        self.failures += 1
        return random.uniform(0, min(MAX_BACKOFF, 0.05 * 2 ** self.failures))

    def succeeded(self) -> None:
        if self.failures:
            logger.warning("Redis is back (%s) after %d failed tries", self.what, self.failures)
        self.failures = 0


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
