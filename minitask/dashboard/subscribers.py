"""The broadcast subscribers page: each broadcast queue's subscribers and their lag.

A section (``sections.py``) like any feature's: it reads the cursors hash of each
queue that has a broadcast task, one bounded read per queue.
"""
from __future__ import annotations

from typing import Any, Dict, List

from .sections import Section, register_section

COLUMNS = ["queue", "subscriber", "lag", "last seen"]


def subscriber_rows(app: Any) -> List[Dict[str, Any]]:
    """One row per subscriber of each queue that some broadcast task of ``app`` uses."""
    queues = sorted({task.options.queue for task in app.tasks.values()
                     if task.options.broadcast})
    rows: List[Dict[str, Any]] = []
    for queue in queues:
        for subscriber in app.subscribers(queue):
            seen = subscriber.last_seen
            rows.append({"queue": queue, "subscriber": subscriber.name, "lag": subscriber.lag,
                         "last seen": seen.isoformat(timespec="seconds") if seen else "never"})
    return rows


register_section(Section("subscribers", "Broadcast subscribers", COLUMNS, subscriber_rows))
