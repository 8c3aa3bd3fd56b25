"""One clock for every worker: Redis's.

A worker compares times other workers wrote: a lease's deadline (an expired one is
taken back and its task delivered again), a delayed or retried task's due time, a
schedule's armed tick, a heartbeat's age. Read from each machine's own clock, a
worker whose clock runs an hour ahead would take every running task of the others as
"lease expired" and run it a second time, and one an hour behind would have its own
taken. So a worker measures how far its clock is from Redis's (``TIME``, the
shortest of three round trips) as it starts, and from then on the app's clock
(``SystemClock.go_by_redis``) reads Redis's time in its process: everything it writes
or compares is on Redis's clock, with no command in any script. Between measures a
reading is Redis's time at the last one plus the monotonic clock's progress, so a
step of the machine's clock (NTP, a VM resumed) moves nothing; the offset is measured
again every ``CLOCK_REFRESH_S``, and at the next heartbeat after such a step (seen
against the monotonic clock).
"""
from __future__ import annotations

import time
from typing import Any, Optional

from ..broker.health import (CLOCK_REFRESH_S, CLOCK_SKEW_BOUND_MS, clock_skew_ms, no_time_why,
                             skew_warning)
from ..errors import BrokerError
from ..printable import own_logger
from ..wire.message import SystemClock

logger = own_logger(__name__)

#: A step of the machine's clock (ms) that has the offset measured again at once.
JUMP_MS = 250
#: TIME calls a measurement makes: the one with the shortest round trip counts.
SAMPLES = 3
#: The longest heartbeat period of a worker (ms; worker/loop.py's heartbeat_period).
HEARTBEAT_MOST_MS = 5_000
#: The share of visibility_timeout a worker on its own clock may be off by before its
#: start-up warning says that leases may be taken early (a running task's lease is renewed
#: to visibility_timeout ahead at least every third of it: two thirds take it).
OWN_CLOCK_SHARE = 0.5


class RedisTime:
    """How far one process's clock is from Redis's, and when to measure it again (a
    process pool's child inherits its supervisor's, then measures on its own)."""

    def __init__(self) -> None:
        self.measured = False
        self._next = 0.0   # monotonic s: when to measure again
        self._apart = 0.0  # the wall clock less the monotonic one (s) at the last measure

    def measure(self, clock: Any, client: Any) -> Optional[int]:
        """Measure the skew (ms) and set ``clock`` (a ``SystemClock``) to Redis's time;
        None, the offset kept, when Redis cannot be asked."""
        skew = clock_skew_ms(client, SAMPLES)
        now = time.monotonic()
        self._next = now + CLOCK_REFRESH_S
        if skew is None:
            return None  # (a jump seen stays seen: the next heartbeat tries again)
        self.measured = True
        self._apart = time.time() - now
        clock.go_by_redis(skew)
        return skew

    def due(self) -> bool:
        """Time to measure again: the period is over, or the clock jumped since (never
        measured: once a period, so that one TIME refused or cut at start-up does not
        leave the worker on its own clock for good)."""
        now = time.monotonic()
        if not self.measured:
            return now >= self._next
        return (now >= self._next
                or abs(time.time() - now - self._apart) * 1000 > JUMP_MS)


def start_clock(worker: Any) -> None:
    """As a worker starts: measure its clock against Redis's, go by Redis's time, and
    say so when the two are far apart (a test's own clock is no machine's: kept)."""
    clock = worker.app.clock
    if not isinstance(clock, SystemClock):
        return
    worker.clock_skew_ms = worker.redis_time.measure(clock, worker.broker.client)
    if worker.clock_skew_ms is None:
        logger.warning("%s", own_clock_warning(worker))
    warning = skew_warning(worker.clock_skew_ms, "this worker's", corrected=True)
    if warning is not None:
        logger.warning("%s", warning)


def own_clock_warning(worker: Any) -> str:
    """What a worker that cannot ask Redis its time says as it starts: it compares
    other workers' lease deadlines with its own clock, so one far off takes their leases
    early (their tasks run twice) or has its own taken. How far off is estimated from
    the newest heartbeat in the registry (the live workers beat at least every
    ``HEARTBEAT_MOST_MS``, on Redis's time), as ``minitask status`` judges a heartbeat
    "ahead"; risky past ``OWN_CLOCK_SHARE`` of the visibility_timeout."""
    said = (f"this worker cannot ask Redis its time ({no_time_why(worker.broker.client)}): "
            f"it goes by its own clock, "
            f"asking again every {CLOCK_REFRESH_S:.0f} s; ")
    try:
        newest = worker.broker.registry.newest_heartbeat()
    except BrokerError as exc:
        return said + f"how far off it is could not be estimated ({exc})"
    if newest is None:
        return said + ("no other worker's heartbeat to estimate how far off it is by: "
                       "keep its clock in sync (NTP)")
    skew_ms = worker.app.clock.now_ms() - newest
    # the newest heartbeat may be HEARTBEAT_MOST_MS old: ahead by at least this much
    least_ms = skew_ms - HEARTBEAT_MOST_MS if skew_ms > 0 else -skew_ms
    bound_ms = worker.app.visibility_timeout * 1000 * OWN_CLOCK_SHARE
    way = "ahead of" if skew_ms > 0 else "behind"
    said += (f"by the newest heartbeat of the live workers it is some "
             f"{abs(skew_ms) / 1000:.1f} s {way} theirs")
    if least_ms <= bound_ms:
        return said + " (keep it in sync, NTP)"
    taken = ("it may take the leases of their running tasks early, running those tasks "
             "twice" if skew_ms > 0 else
             "they may take the leases of its running tasks early, running those tasks twice")
    return said + (f", more than {OWN_CLOCK_SHARE:.0%} of the visibility_timeout "
                   f"({worker.app.visibility_timeout:g} s): {taken}; set its clock right "
                   f"(NTP) or grant +time")


def refresh_clock(worker: Any, speaks: bool) -> None:
    """At a heartbeat, before it renews leases: measure again when due (``RedisTime``).
    A clock that went far from Redis's, or came back, is said when ``speaks`` (a
    process pool's supervisor speaks for its children)."""
    redis_time: RedisTime = worker.redis_time
    clock = worker.app.clock
    if not redis_time.due() or not isinstance(clock, SystemClock):
        return
    before: Optional[int] = worker.clock_skew_ms
    skew = redis_time.measure(clock, worker.broker.client)
    if skew is None:
        return
    worker.clock_skew_ms = skew
    if not speaks:
        return
    far, was_far = abs(skew) > CLOCK_SKEW_BOUND_MS, before is not None and abs(
        before) > CLOCK_SKEW_BOUND_MS
    if far and (not was_far or abs(skew - (before or 0)) > CLOCK_SKEW_BOUND_MS):
        logger.warning("%s", skew_warning(skew, "this worker's", corrected=True))
    elif was_far and not far:
        logger.info("this worker's clock is within %.1f s of Redis's again",
                    CLOCK_SKEW_BOUND_MS / 1000)
