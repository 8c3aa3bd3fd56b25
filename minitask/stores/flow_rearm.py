"""Re-arming limiters and groups that wait for a slot no outcome will free.

A limiter waiting for a max_running slot has no due time (flow.lua): the outcome of
a holder re-arms it, reading the holder's flow spec. A holder whose spec was lost
(deleted, the whole flow hash deleted or evicted, overwritten with data minitask did
not write) frees nothing at its outcome, so the limiter's parked tasks would wait
for good. Made due again, a fetch tries the limiter: one still full frees any holder
whose spec no longer names it, or whose lease is gone (flow.lua's vacate), and leaves
again, having cost a bounded check. Done at a worker's start (limiters and groups)
and from its heartbeat every ``REARM_EVERY_MS`` (limiters), a cost bounded by the
number of limiters with parked tasks, never by the number of tasks.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ..broker.keys import queue_keys
from ..broker.transport import Transport
from .foreign import raise_refusals, removed_members

#: The most limiters, and groups, made due at once (the others by their next task
#: or outcome).
REARM_MOST = 100_000

#: How often a worker's heartbeat looks for limiters waiting for a slot with no due
#: time (ms): the longest a limiter whose holders' specs were lost waits on a live
#: worker, beside a heartbeat period.
REARM_EVERY_MS = 10_000

#: The longest limiter name read (as the flow spec's longest, flow.SPEC_BYTES).
NAME_BYTES = 16_384


def rearm(transport: Transport, app_name: str, queue: str, now_ms: int,
          groups: Optional[Tuple[int, int, int]] = None) -> int:
    """Make due now each limiter of ``queue`` with parked tasks, and (``groups``: the
    most a count is, the longest group name and count, in bytes) each group with ready
    tasks, that has neither a due time nor a live token; how many were made due. A key
    of another type is left to the fetches."""
    k = queue_keys(app_name, queue)
    limiters = waiting_limiters(transport, k)
    found = waiting_groups(transport, k, queue, *groups) if groups else []
    names = limiters + [b"g:" + name for name in found]
    if not names:
        return 0
    pipe = transport.client.pipeline(transaction=False)
    for name in names:
        pipe.zscore(k.flow_due, name)
    for group in found:  # (a name as stored: bytes)
        pipe.hexists(k.flow_prefix.encode() + b"g:" + group + b":turn", "tok")
    read = pipe.execute(raise_on_error=False)
    raise_refusals(read)
    armed = [False] * len(limiters) + [held is True or held == 1
                                       for held in read[len(names):]]
    due = [name for name, score, live in zip(names, read, armed)
           if score is None and not live]
    make_due(transport, k, due, now_ms, nx=True)
    return len(due)


def waiting_limiters(transport: Transport, k: Any) -> List[Any]:
    """The limiters (keys ``k``) with parked tasks, ``REARM_MOST`` at most."""
    limiters: List[Any] = []
    cursor = 0
    while len(limiters) < REARM_MOST:
        pipe = transport.client.pipeline(transaction=False)
        pipe.sscan(k.flow_limiters, cursor, count=1000)
        scanned = pipe.execute(raise_on_error=False)[0]
        if isinstance(scanned, Exception):
            break
        cursor, page = scanned
        limiters += [name for name in page if len(name) <= NAME_BYTES]
        if not cursor:
            break
    return limiters[:REARM_MOST]


def waiting_groups(transport: Transport, k: Any, queue: str, most: int, group_bytes: int,
                   count_bytes: int) -> List[Any]:
    """The groups of ``queue`` with ready tasks, ``REARM_MOST`` at most, read as status
    reads them (groups_top.lua: a name longer than any group's is removed, never sent)."""
    _, _, flat, removed, *_ = transport.run_calls(
        [("groups_top", queue, (k.groups_ready, k.groups, k.groups_solo),
          (most, REARM_MOST, group_bytes, count_bytes), 0)],
        f"read the groups of queue {queue!r}")[0]
    removed_members(k.groups, removed, "group name")
    return list((flat or [])[0::2])


def make_due(transport: Transport, k: Any, names: List[Any], now_ms: int,
             nx: bool = False) -> None:
    """``names`` (limiters, ``g:<group>``) due now in ``k.flow_due``, a worker woken."""
    if names:
        pipe = transport.client.pipeline(transaction=True)
        pipe.zadd(k.flow_due, {name: now_ms for name in names}, nx=nx)
        pipe.rpush(k.wake, b"1")
        raise_refusals(pipe.execute(raise_on_error=False))


class Rearming:
    """When the heartbeat next re-arms the waiting limiters (``REARM_EVERY_MS`` apart;
    the first a period after the start, which re-armed them already)."""

    def __init__(self) -> None:
        self.next_ms: Optional[int] = None

    def due(self, now_ms: int) -> bool:
        """Whether it is time (and if so, the next time set)."""
        if self.next_ms is not None and now_ms < self.next_ms:
            return False
        first = self.next_ms is None
        self.next_ms = now_ms + REARM_EVERY_MS
        return not first
