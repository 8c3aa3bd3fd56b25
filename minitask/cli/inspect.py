"""``minitask inspect``: everything Redis holds about one task."""
from __future__ import annotations

import argparse
from typing import Any, List

from ..admin import TaskInfo, inspect
from ..errors import ConfigurationError
from ..printable import printable
from .options import add_app_options, emit_json, load, takes_words

USAGE = "minitask inspect -A APP ID [--json]"


def register(commands: Any) -> None:
    parser = commands.add_parser("inspect", usage=USAGE, help="show one task by its id",
                                 description="Show a task's status, queue, arguments, "
                                 "deliveries and outcome (value, or error and traceback).")
    add_app_options(parser, level="WARNING")
    parser.add_argument("--json", action="store_true", help="print JSON")
    takes_words(parser)
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if len(args.words) != 1:
        raise ConfigurationError(f"name one task id (usage: {USAGE})")
    task_id = args.words[0]
    app = load(args.app)
    try:
        info = inspect(app, task_id)
    finally:
        app.close()
    if info is None:
        if args.json:
            emit_json({"task_id": task_id, "status": "unknown"})
        else:
            print(f"task {printable(task_id)}: unknown to app {app.name!r} (never enqueued on "
                  f"this broker, or its result expired)")
        return 1
    if args.json:
        emit_json(info.as_dict())
    else:
        print("\n".join(describe(info)))
    return 0


def describe(info: TaskInfo) -> List[str]:
    lines = [f"task id      {printable(info.task_id)}", f"status       {info.status}",
             f"queue        {printable(info.queue)}"]
    shown = [("task", info.name), ("args", info.args), ("kwargs", info.kwargs),
             ("priority", info.priority), ("attempt", info.attempt),
             ("deliveries", info.deliveries or None), ("enqueued at", info.enqueued_at),
             ("eta", info.eta), ("due at", info.due_at), ("lease until", info.lease_until),
             ("finished at", info.finished_at), ("reason", info.reason or None),
             ("note", info.note or None)]
    for label, value in shown:
        if value is None or value == "":
            continue
        text = value.isoformat() if hasattr(value, "isoformat") else (
            repr(value) if label in ("args", "kwargs") else str(value))
        lines.append(f"{label:<12} {printable(text)}")
    if info.progress is not None:
        shown_total = "" if info.progress.total is None else f" / {info.progress.total}"
        note = "" if info.progress.message is None else f"  {info.progress.message}"
        lines.append(printable(f"{'progress':<12} {info.progress.current}{shown_total}{note}  "
                               f"(at {info.progress.at.isoformat()})"))
    if info.status == "succeeded":
        lines.append(printable(f"{'value':<12} {info.value!r}"))
    if info.exc_type:
        lines.append(printable(f"{'error':<12} {info.exc_type}: {info.message}"))
    if info.traceback:
        lines += ["", printable(info.traceback.rstrip(), keep_newlines=True)]
    return lines
