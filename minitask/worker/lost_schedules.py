"""Lost schedules: a running worker writes back its decorated schedules Redis lost.

A decorated schedule's code is the truth for it: a worker writes it when it
starts (``TickSource.publish``). When Redis then loses its record (a restart
without persistence, a failover to an empty replica, a deleted key), the
worker's read of the schedules finds no armed tick for it; the worker writes it
back from the code (or only arms it, its record there and unchanged: its tick was
lost, a ticks key deleted or evicted), armed at its next tick, as it does when it starts: its
next run is that tick, never one fired already (a tick is fired once:
schedule_fire.lua). One removed by ``remove_schedule`` is marked so in the
queue's ``schedules_removed`` set (its newest REMOVED_MOST marks), and is not
written back (schedule_save.lua): it comes back when a worker starts, as before.

The cost is bounded by the decorated schedules: one call for each of those with
no armed tick, at the reads the worker makes already (ticks.py).
"""
from __future__ import annotations

import time
from typing import Dict, List, Sequence

from ..errors import BrokerError
from ..periodic import Schedule
from ..printable import own_logger, printable
from ..stores.foreign import foreign
from ..stores.schedules import Armed
from .host import Host

logger = own_logger(__name__)


def write_back(host: Host, decorated: Sequence[Schedule], found: Dict[str, List[Armed]],
               now_ms: int) -> bool:
    """Write back each of ``decorated`` of a queue read (``found``: a read whose key
    was of another type gave no entries, and is left to ``TickSource._restore``)
    that has no armed entry there and a next tick, if its record is gone and it
    was not removed; True when one was written (the worker reads again, then fires)."""
    written = False
    for schedule in decorated:
        entries = found.get(schedule.queue)
        if entries is None or any(entry.name == schedule.name for entry in entries):
            continue
        following = schedule.next_after(now_ms)
        if following is None:
            continue  # no more ticks: armed by none
        try:
            saved = host.broker.schedules.save(schedule, following, missing=True)
        except BrokerError as exc:
            if not foreign(exc):
                raise
            continue  # data minitask did not write in its keys: said by the read
        if saved:
            logger.warning("schedule %s: its record or its tick in queue %r was gone (Redis "
                           "lost it: a restart without persistence, a failover, a deleted "
                           "key); written again from the app's code, next run at %s",
                           printable(schedule.name), printable(schedule.queue),
                           time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(following / 1000)))
            written = True
    return written
