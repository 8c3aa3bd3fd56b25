"""``minitask cancel``: withdraw tasks that have not started."""
from __future__ import annotations

import argparse
from typing import Any, Dict

from ..errors import ConfigurationError
from .options import add_app_options, emit_json, load, takes_words

USAGE = "minitask cancel -A APP ID... [--json]"


def register(commands: Any) -> None:
    cancel = commands.add_parser("cancel", usage=USAGE,
                                 help="withdraw tasks that have not started",
                                 description="Withdraw tasks that have not started: they never "
                                 "run. Exit code 1 when one could not be cancelled.")
    add_app_options(cancel, level="WARNING")
    cancel.add_argument("--json", action="store_true", help="print JSON")
    takes_words(cancel)
    cancel.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if not args.words:
        raise ConfigurationError(f"name the task ids to cancel (usage: {USAGE})")
    app = load(args.app)
    outcome: Dict[str, str] = {}
    try:
        for task_id in args.words:
            handle = app.handle(task_id)
            outcome[task_id] = "cancelled" if handle.cancel() else handle.status()
    finally:
        app.close()
    if args.json:
        emit_json(outcome)
    else:
        for task_id, status in outcome.items():
            if status == "cancelled":
                print(f"{task_id}: cancelled")
            else:
                print(f"{task_id}: not cancelled, it is {status}")
    return 0 if all(status == "cancelled" for status in outcome.values()) else 1
