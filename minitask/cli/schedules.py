"""``minitask schedules``: the app's periodic schedules, with their next and last tick."""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List

from ..admin import schedule_listing
from ..periodic import describe
from ..printable import printable
from .options import add_app_options, load


def register(commands: Any) -> None:
    schedules = commands.add_parser("schedules", help="list periodic schedules")
    add_app_options(schedules)
    schedules.add_argument("--json", action="store_true", help="print JSON")
    schedules.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    try:
        found, unreadable = schedule_listing(app)
        listed = describe(found)
    finally:
        app.close()
    if args.json:
        print(json.dumps({"app": app.name, "schedules": listed, "unreadable": unreadable},
                         indent=2, sort_keys=True))
    else:
        print(_table(listed) if listed or not unreadable else "no readable schedules")
        for entry in unreadable:  # shown, not hidden: fix or delete them with redis-cli
            where = f"field '{entry['field']}' of " if entry["field"] else ""
            print(printable(f"unreadable schedule record: {where}key {entry['key']}: "
                            f"{entry['problem']} (not fired; inspect it with redis-cli, then "
                            f"fix or delete it)"))
    return 0


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
