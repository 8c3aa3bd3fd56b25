"""Facts about the Redis a worker or an operator uses that no error reveals: how far
this machine's clock is from Redis's, how many replicas confirm writes, and the
longest value the server reads in a command.

Delayed tasks are times from producers' clocks: one far from Redis's starts its
delayed tasks early or late by as much, and nothing fails. A worker measures its own
clock's distance and goes by Redis's time (worker/redis_time.py), but says so.
A ``durability`` setting with fewer replicas than it asks for makes
every confirmed write wait its whole timeout. Both are only ever slow or wrong, never
an exception, so they are checked and said out loud instead. A value longer than the
server's ``proto-max-bulk-len`` is refused, or the connection reset while it is sent
(which looks like an outage): the worker caps results below it (``bulk_limit``).
"""
from __future__ import annotations

import time
from typing import Any, Optional, Tuple

import redis

from ..wire.message import SystemClock

#: A clock further than this from Redis's is worth a warning (ms).
CLOCK_SKEW_BOUND_MS = 2_000
#: How often a worker measures again how far its clock is from Redis's (s).
CLOCK_REFRESH_S = 30.0
#: Redis's default ``proto-max-bulk-len``: taken when the server cannot be asked.
DEFAULT_BULK_LIMIT = 512 * 1024 * 1024


def clock_skew_ms(client: Any, samples: int = 1) -> Optional[int]:
    """How far this machine's clock is ahead of Redis's (ms; negative: behind), from
    ``samples`` TIME calls, each timed at its middle: the one with the shortest round
    trip counts (off by at most half of it); None when it cannot be asked (an ACL
    without TIME, a cluster client)."""
    if not isinstance(client, redis.Redis):
        return None
    best: Optional[Tuple[float, float]] = None  # (round trip, skew), in ms
    for _ in range(samples):
        before = time.time()
        started = time.monotonic()
        try:
            seconds, micros = client.time()
        except redis.RedisError:
            return None
        took = time.monotonic() - started
        local_ms = (before + took / 2) * 1000
        skew = local_ms - (int(seconds) * 1000 + int(micros) / 1000)
        if best is None or took < best[0]:
            best = (took, skew)
    return None if best is None else round(best[1])


def no_time_why(client: Any) -> str:
    """Why ``clock_skew_ms`` could not ask ``client``, as a worker's log says it."""
    if isinstance(client, redis.Redis):
        return "TIME refused, an ACL without it: grant +time; or not answered"
    return "a Redis Cluster client"


def connected_replicas(client: Any) -> Optional[int]:
    """The replicas connected to the primary now; None when it cannot be asked."""
    if not isinstance(client, redis.Redis):
        return None
    try:
        info = client.info("replication")
    except redis.RedisError:
        return None
    count = info.get("connected_slaves") if isinstance(info, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def skew_warning(skew_ms: Optional[int], whose: str, corrected: bool = False) -> Optional[str]:
    """What to say of ``whose`` clock (``"this machine's"``, ``"worker w1's"``), if
    anything: delayed tasks follow the clocks that wrote them. A worker's clock is
    ``corrected``: it goes by Redis's time all the same (worker/redis_time.py), but
    the other programs of its machine do not."""
    if skew_ms is None or abs(skew_ms) <= CLOCK_SKEW_BOUND_MS:
        return None
    way = "ahead of" if skew_ms > 0 else "behind"
    said = f"{whose} clock is {abs(skew_ms) / 1000:.1f} s {way} Redis's: "
    if corrected:
        return said + (f"it goes by Redis's time instead (measured again every "
                       f"{CLOCK_REFRESH_S:.0f} s), so it takes no task early nor "
                       f"from another worker; delayed tasks the other programs of its "
                       f"machine send are off by as much (synchronise it with NTP)")
    return said + ("delayed tasks and schedule ticks it writes are off by as much "
                   "(synchronise it with NTP)")


def replica_warning(mode: Optional[str], wanted: int, replicas: Optional[int],
                    timeout: float, at_once: Optional[Tuple[int, str]] = None) -> Optional[str]:
    """What to say of a durability setting the primary's replicas cannot meet;
    ``at_once``: how many outcomes the worker saying it waits for at once, and why
    (none given: a worker's slots, as ``minitask status`` says it)."""
    if mode is None or replicas is None or replicas >= wanted:
        return None
    if at_once is None:
        pace = ("a worker's slots each record one outcome at a time (its asyncio pool at "
                "most four at once)")
    else:
        count, why = at_once
        pace = (f"this worker records at most {count} at once ({why}), about "
                f"{count / timeout:.3g} task(s) a second")
    return (f"durability={mode!r} asks {wanted} replica(s) to confirm each write, but the "
            f"primary has {replicas}: every confirmed enqueue and outcome waits its whole "
            f"durability_timeout ({timeout:g} s) and then fails or is logged unconfirmed; "
            f"{pace}")


def bulk_limit(client: Any) -> int:
    """The longest value the server reads as one argument of a command (its
    ``proto-max-bulk-len``), from one CONFIG GET (on a Redis Cluster, of one node);
    Redis's default when it cannot be asked (an ACL or a managed Redis refusing
    CONFIG) or answers something else."""
    limit = asked_bulk_limit(client)
    return DEFAULT_BULK_LIMIT if limit is None else limit


def asked_bulk_limit(client: Any) -> Optional[int]:
    """``bulk_limit`` as the server answers it; None when it cannot be asked."""
    try:
        reply = client.config_get("proto-max-bulk-len")
    except redis.RedisError:
        return None
    values = list(reply.values()) if isinstance(reply, dict) else []
    try:
        limit = int(values[0]) if len(values) == 1 else 0
    except (TypeError, ValueError):
        limit = 0
    return limit if limit > 0 else None


def on_redis_time(clock: Any, client: Any) -> Optional[int]:
    """Have ``clock`` (a ``SystemClock``; any other is a test's, left alone) read Redis's
    time, measured again at most every ``CLOCK_REFRESH_S``: workers write heartbeats and
    leases on it (worker/redis_time.py), and a reader whose clock is ahead judged every
    worker dead and pruned it from the registry. The skew (ms) last measured; None when
    Redis cannot be asked (an ACL without TIME, a cluster client: its own clock then)."""
    if not isinstance(clock, SystemClock):
        return None
    measured = clock.measured_at
    if measured is not None and time.monotonic() - measured < CLOCK_REFRESH_S:
        return clock.offset_ms
    skew = clock_skew_ms(client)
    if skew is not None:
        clock.go_by_redis(skew)
    return skew
