"""Walking the pages of a queue's schedules through the admin API, for the tests of
the schedule listings (a real redis-server)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from minitask import Minitask
from minitask.admin import schedule_counts, schedule_page


def walk(app: Minitask, limit: int, queue: str = "other", after: Optional[Any] = None,
         counts: Optional[Dict[str, int]] = None, most: int = 60) -> List[str]:
    """Every schedule listed, and every unreadable field, walking the pages of ``limit``
    from ``after`` (None: the first); at most ``most`` pages, else no end (raised)."""
    counts = schedule_counts(app, [queue]) if counts is None else counts
    listed: List[str] = []
    for _ in range(most):
        page = schedule_page(app, counts, after, limit)
        listed += [schedule.name for schedule in page.schedules]
        listed += [row["field"] for row in page.unreadable]
        after = page.next
        if after is None:
            return listed
    raise AssertionError(f"no end of the pages: {len(listed)} listed")
