"""``minitask tasks``: the registered tasks and their options."""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Sequence, Tuple

from .options import add_app_options, emit_json, load


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "tasks", help="list the app's tasks, their options and its routes",
        description="The tasks the app registers (with its task plugins), each with its "
        "queue and options, then the app's routes. Reads no Redis.")
    add_app_options(parser, level="WARNING")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    rows: List[Dict[str, Any]] = []
    for name in sorted(app.tasks):
        options = app.tasks[name].options
        rows.append({"name": name, "queue": options.queue, "priority": options.priority,
                     "retries": options.retries, "retry_backoff": options.retry_backoff,
                     "retry_backoff_max": options.retry_backoff_max,
                     "retry_on": [t.__name__ for t in options.retry_on],
                     "timeout": options.timeout, "soft_timeout": options.soft_timeout,
                     "ignore_result": options.ignore_result,
                     "result_ttl": options.result_ttl,
                     "rate_limit": options.limits.rate_limit,
                     "max_running": options.limits.max_running or None,
                     "group_by": options.grouping.group_by,
                     "group_max_running": options.grouping.max_running or None,
                     "group_rate_limit": options.grouping.rate_limit,
                     "route": options.route})
    routes = [{"pattern": pattern, **options} for pattern, options in app.routes.items()]
    if args.json:
        emit_json({"app": app.name, "tasks": rows, "routes": routes})
        return 0
    print(f"app {app.name}: {len(rows)} task(s)\n")
    table = [("task", "queue", "prio", "retries", "timeout", "soft", "retry on", "limits",
              "route")]
    for row in rows:
        limits = " ".join(part for part in (
            row["rate_limit"], row["max_running"] and f"max {row['max_running']}",
            row["group_by"] and f"group by {row['group_by']}",
            row["group_max_running"] and f"group max {row['group_max_running']}",
            row["group_rate_limit"] and f"group {row['group_rate_limit']}") if part)
        table.append((row["name"], row["queue"], str(row["priority"]), str(row["retries"]),
                      "-" if row["timeout"] is None else f"{row['timeout']:g}",
                      "-" if row["soft_timeout"] is None else f"{row['soft_timeout']:g}",
                      ",".join(row["retry_on"]) if row["retries"] else "-", limits or "-",
                      row["route"] or "-"))
    for line in columns(table, numeric=(2, 3, 4, 5)):
        print(line)
    if routes:  # also for names no task here registers: sends by name take them
        print(f"\nroutes, first match wins ({len(routes)}):\n")
        listed = [("pattern", "queue", "prio")] + [
            (route["pattern"], route.get("queue", "-"), str(route.get("priority", "-")))
            for route in routes]
        for line in columns(listed, numeric=(2,)):
            print(line)
    return 0


def columns(table: Sequence[Sequence[str]], numeric: Tuple[int, ...] = ()) -> List[str]:
    """The rows as lines whose columns line up, each as wide as its widest cell;
    ``numeric`` columns are aligned right."""
    widths = [max(len(row[index]) for row in table) for index in range(len(table[0]))]
    return ["  ".join(cell.rjust(width) if index in numeric else cell.ljust(width)
                      for index, (cell, width) in enumerate(zip(row, widths))).rstrip()
            for row in table]
