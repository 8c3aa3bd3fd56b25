"""The broadcast subscribers page: each broadcast queue's subscribers and their lag.

A section (``sections.py``) like any feature's: per queue that has a broadcast
task, at most SHOWN subscribers, the furthest behind first (one bounded read),
and a row counting the others.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, List

from .sections import Section, register_section

COLUMNS = ["queue", "subscriber", "lag", "last seen"]
#: Subscribers shown per queue.
SHOWN = 100


def subscriber_rows(app: Any) -> List[Dict[str, Any]]:
    """One row per subscriber of each queue that some broadcast task of ``app`` uses."""
    queues = sorted({task.options.queue for task in app.tasks.values()
                     if task.options.broadcast})
    rows: List[Dict[str, Any]] = []
    for queue in queues:
        shown, count = app.broker.broadcasts.few(queue, SHOWN)
        for cursor in shown:
            seen = cursor.last_seen_ms
            rows.append({"queue": queue, "subscriber": cursor.name, "lag": cursor.lag,
                         "last seen": "never" if seen is None else
                         _dt.datetime.fromtimestamp(seen / 1000, tz=_dt.timezone.utc)
                         .isoformat(timespec="seconds")})
        if count > len(shown):
            rows.append({"queue": queue, "subscriber": f"... and {count - len(shown)} more, "
                         f"not shown", "lag": "", "last seen": ""})
    return rows


register_section(Section("subscribers", "Broadcast subscribers", COLUMNS, subscriber_rows))
