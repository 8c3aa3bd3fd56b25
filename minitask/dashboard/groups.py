"""The fair queues page: per queue, how many groups hold ready tasks, and the
largest backlogs by group (docs/guide/fair-queues.rst).

A section (``sections.py``) like any feature's. Reads are bounded: the queues the
dashboard lists (those the app declares and at most a hundred more), and for each
the ``LARGEST`` backlogs, in one round trip (``FlowStore.group_counts_many``: the
count of groups is a ZCARD, the backlogs a ZREVRANGE of that many). A group's name
is data anyone with Redis access may have written: the page shows it as it shows every
string (``printable``, the template's finalize: control and bidirectional characters
escaped, then HTML-escaped); ``/api/section/groups`` carries the name as Redis holds
it (JSON escapes what it must). A name longer than a group can be is cut, on the page and
in the JSON alike (``FlowStore`` reads it so: ``shown_name``).
"""
from __future__ import annotations

from typing import Any, Dict, List

from ..admin import group_counts, shown_queues
from .sections import Section, register_section

#: Groups listed per queue: its largest backlogs.
LARGEST = 10
COLUMNS = ["queue", "groups", "grouped ready", "group", "ready"]


def group_rows(app: Any) -> List[Dict[str, Any]]:
    """A row per listed backlog (the ``LARGEST`` of each queue with groups, largest
    first), each with its queue's count of groups and of grouped ready tasks."""
    queues, _ = shown_queues(app)
    rows: List[Dict[str, Any]] = []
    for queue, counts in sorted(group_counts(app, queues, LARGEST).items()):
        for group, ready in counts["largest_groups"] or [("", 0)]:
            rows.append({"queue": queue, "groups": counts["groups"],
                         "grouped ready": counts["grouped"], "group": group, "ready": ready})
    return rows


register_section(Section("groups", "Fair queues: groups", COLUMNS, group_rows))
