"""``minitask dead``: list, show, requeue and purge dead letters."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from ..admin import DeadTask, app_queues, inspect
from ..app import Minitask
from ..errors import ConfigurationError
from ..printable import printable
from .options import add_app_options, add_yes, confirmed, emit_json, load, takes_words

ACTIONS = ("list", "show", "requeue", "purge")
USAGE = ("minitask dead -A APP {list | show ID | requeue (ID... | --all --yes) | purge (ID... "
         "| --all --yes)} [--queue Q] [--json]")


def register(commands: Any) -> None:
    dead = commands.add_parser("dead", help="list, show, requeue or purge dead letters",
                               usage=USAGE, description="Dead letters: tasks that will not "
                               "run again, kept with their arguments and why they died.")
    add_app_options(dead, level="WARNING")
    dead.add_argument("--queue", help="only this queue (default: every queue of the app)")
    dead.add_argument("--all", action="store_true", help="requeue or purge every dead letter "
                      "(of --queue)")
    dead.add_argument("--json", action="store_true", help="print JSON")
    add_yes(dead, "every dead letter (--all)")
    takes_words(dead)
    dead.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if not args.words or args.words[0] not in ACTIONS:
        raise ConfigurationError(f"name an action: {', '.join(ACTIONS)} (usage: {USAGE})")
    action, ids = args.words[0], args.words[1:]
    app = load(args.app)
    try:
        if args.queue is not None and args.queue not in app_queues(app):
            print(f"minitask: error: app {app.name!r} has no queue {printable(args.queue)!r}; "
                  f"its queues: {', '.join(map(printable, app_queues(app)))}", file=sys.stderr)
            return 1  # something named was not found
        if action == "list":
            _refuse(ids, "list takes no task id")
            return _list(app, args)
        if action == "show":
            if len(ids) != 1:
                raise ConfigurationError("show takes one task id")
            return _show(app, ids[0], args.json)
        if bool(ids) == bool(args.all):
            raise ConfigurationError(f"{action} takes task ids, or --all (not both)")
        if args.all:
            where = f"queue {args.queue!r}" if args.queue else "every queue"
            count = len(app.dead_letters(args.queue, limit=1_000_000))
            confirmed(args, f"{action}s all {count} dead letter(s) of {where}")
        if action == "requeue":
            return _requeue(app, ids, args)
        return _purge(app, ids, args)
    finally:
        app.close()


def _refuse(ids: List[str], why: str) -> None:
    if ids:
        raise ConfigurationError(f"{why}, got {' '.join(ids)}")


def as_dict(dead: DeadTask) -> Dict[str, Any]:
    return {"task_id": dead.task_id, "queue": dead.queue, "name": dead.name, "args": dead.args,
            "kwargs": dead.kwargs, "reason": dead.reason, "exc_type": dead.exc_type,
            "message": dead.message, "traceback": dead.traceback,
            "dead_at": dead.dead_at.isoformat(), "attempts": dead.attempts,
            "args_hidden": dead.args_hidden}


def _list(app: Minitask, args: argparse.Namespace) -> int:
    letters = app.dead_letters(args.queue)
    if args.json:
        emit_json([as_dict(d) for d in letters])
        return 0
    if not letters:
        print("no dead letters")
        return 0
    print(f"{'dead at (UTC)':<20} {'queue':<14} {'task id':<24} {'task':<28} reason / error")
    for d in letters:
        error = f"{d.exc_type}: {d.message}" if d.exc_type else ""
        print(f"{d.dead_at:%Y-%m-%d %H:%M:%S}  {printable(d.queue):<14} "
              f"{printable(d.task_id):<24} {printable(d.name):<28} {printable(d.reason)}"
              f"{' / ' if error else ''}{printable(_cut(error, 80))}")
    print(f"\n{len(letters)} dead letter(s); minitask dead -A {args.app} show ID for one")
    return 0


def _show(app: Minitask, task_id: str, as_json: bool) -> int:
    info = inspect(app, task_id)
    if info is None or not info.dead:
        print(f"no dead letter has the id {printable(task_id)!r} (minitask dead -A APP list "
              f"shows them)")
        return 1
    dead = {"task_id": info.task_id, "queue": info.queue, "name": info.name or "?",
            "args": info.args or [], "kwargs": info.kwargs or {}, "reason": info.reason,
            "exc_type": info.exc_type, "message": info.message, "traceback": info.traceback,
            "dead_at": info.finished_at.isoformat() if info.finished_at else "",
            "attempts": info.attempt or 0, "args_hidden": info.args_hidden}
    if as_json:
        emit_json(dead)
        return 0
    shown = {key: printable(value) for key, value in dead.items()
             if key not in ("args", "kwargs", "traceback")}
    print(f"task id   {shown['task_id']}\nqueue     {shown['queue']}\n"
          f"task      {shown['name']}\n"
          + ("args      (hidden: the task has hide_args=True)\n" if info.args_hidden else
             f"args      {printable(repr(dead['args']))}\n"
             f"kwargs    {printable(repr(dead['kwargs']))}\n")
          + f"attempts  {shown['attempts']}\n"
          f"dead at   {shown['dead_at']}\nreason    {shown['reason']}\n"
          f"error     {shown['exc_type']}: {shown['message']}")
    if dead["traceback"]:
        print(f"\n{printable(str(dead['traceback']).rstrip(), keep_newlines=True)}")
    return 0


def _requeue(app: Minitask, ids: List[str], args: argparse.Namespace) -> int:
    if args.all:
        ids = [d.task_id for d in app.dead_letters(args.queue, limit=1_000_000)]
    missing = [task_id for task_id in ids if not app.requeue_dead(task_id)]
    requeued = len(ids) - len(missing)
    if args.json:
        emit_json({"requeued": requeued, "not_found": missing})
    else:
        print(f"requeued {requeued} dead letter(s)")
        for task_id in missing:
            print(f"no dead letter has the id {task_id!r}")
    return 1 if missing else 0


def _purge(app: Minitask, ids: List[str], args: argparse.Namespace) -> int:
    missing: List[str] = []
    if args.all:
        purged = app.purge_dead(queue=args.queue)
    else:
        purged = 0
        for task_id in ids:
            count = app.purge_dead(task_id, queue=args.queue)
            purged += count
            if not count:
                missing.append(task_id)
    if args.json:
        emit_json({"purged": purged, "not_found": missing})
    else:
        print(f"purged {purged} dead letter(s)")
        for task_id in missing:
            print(f"no dead letter has the id {task_id!r}")
    return 1 if missing else 0


def _cut(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[:width - 3] + "..."
