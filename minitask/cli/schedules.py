"""``minitask schedules``: the app's periodic schedules, with their next and last tick."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Iterable, List

from ..admin import app_queues, schedule_counts, schedule_page, schedule_pages
from ..periodic import describe
from ..printable import printable
from .options import add_app_options, load


def register(commands: Any) -> None:
    schedules = commands.add_parser(
        "schedules", help="list periodic schedules",
        description="The app's periodic schedules as stored in Redis (a decorated one once "
        "a worker has started), with their next and last tick: the first 100, queue by "
        "queue and the soonest first (--json: all).")
    add_app_options(schedules)
    schedules.add_argument("--json", action="store_true", help="print JSON")
    schedules.set_defaults(command=run)


#: Schedules the table shows at most (the first page: in each queue, the soonest first).
SHOWN = 100
#: Unreadable records ``--json`` holds while it writes the schedules; past that many,
#: it reads the schedules a second time for them, rather than hold them all.
KEPT_UNREADABLE = 1000


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    try:
        counts = schedule_counts(app, app_queues(app))
        if args.json:
            _write_json(app, counts)
            return 0
        page = schedule_page(app, counts, limit=SHOWN)
    finally:
        app.close()
    listed = describe(page.schedules)
    if listed or not (page.unreadable or page.stopped):
        print(_table(listed))
    elif page.unreadable:
        print("no readable schedules")
    for entry in page.unreadable:  # shown, not hidden: fix or delete them with redis-cli
        where = f"field '{entry['field']}' of " if entry["field"] else ""
        print(printable(f"unreadable schedule record: {where}key {entry['key']}: "
                        f"{entry['problem']} (not fired; inspect it with redis-cli, then "
                        f"fix or delete it)"))
    if page.stopped:
        print(printable(page.stopped))
    more = sum(count for count in counts.values() if count > 0) - page.fields
    if page.next is not None and more > 0:
        print(f"... and {more} more schedules (use --json for all)")
    return 0


def _write_json(app: Any, counts: Dict[str, int]) -> None:
    """Every schedule as JSON, written a page at a time as it is read (memory: a page,
    and at most KEPT_UNREADABLE unreadable records): one object, as ``json.dumps``
    would write it whole."""
    out = sys.stdout
    out.write(f'{{"app": {json.dumps(app.name)},\n "schedules": [')
    kept: List[Dict[str, str]] = []
    seen = 0
    first = True
    for page in schedule_pages(app, counts):
        for row in describe(page.schedules):
            out.write(("\n  " if first else ",\n  ") + json.dumps(row, sort_keys=True))
            first = False
        seen += len(page.unreadable)
        kept += page.unreadable[:max(0, KEPT_UNREADABLE - len(kept))]
    out.write('],\n "unreadable": [')
    unreadable: Iterable[Dict[str, str]] = kept if seen <= KEPT_UNREADABLE else (
        entry for page in schedule_pages(app, counts) for entry in page.unreadable)
    for index, entry in enumerate(unreadable):
        out.write(("\n  " if index == 0 else ",\n  ") + json.dumps(entry, sort_keys=True))
    out.write("]}\n")
    out.flush()


def _table(rows: List[Dict[str, Any]]) -> str:
    if not rows:
        return "no schedules (decorated ones are written when a worker starts)"
    columns = [("name", "name"), ("task", "task"), ("queue", "queue"), ("spec", "spec"),
               ("tz", "tz"), ("next (UTC)", "next_at"), ("last (UTC)", "last_at")]
    cells = [[_cell(row[key]) for _, key in columns] for row in rows]
    widths = [max(len(title), *(len(line[i]) for line in cells))
              for i, (title, _) in enumerate(columns)]
    lines = ["  ".join(title.ljust(width) for (title, _), width in zip(columns, widths))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
              for line in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = printable(value)
    return text.replace("T", " ").replace("Z", "") if text.endswith("Z") else text
