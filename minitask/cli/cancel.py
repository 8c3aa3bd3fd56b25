"""``minitask cancel``: withdraw tasks that have not started, or with ``--running``
also stop those that have, as ``handle.cancel(running=True)`` does."""
from __future__ import annotations

import argparse
from typing import Any, Dict

from ..errors import ConfigurationError
from .options import add_app_options, emit_json, load, require_acl, takes_words

USAGE = "minitask cancel -A APP ID... [--running] [--json]"


def register(commands: Any) -> None:
    cancel = commands.add_parser("cancel", usage=USAGE,
                                 help="withdraw tasks that have not started",
                                 description="Withdraw tasks that have not started: they never "
                                 "run. With --running, also stop tasks that are running, on "
                                 "every pool (the process pool kills the attempt's child, the "
                                 "asyncio pool cancels its coroutine, the thread pool sets "
                                 "current_task().cancel_requested for the task to check); they "
                                 "end cancelled, never retried. Exit code 1 when one could not "
                                 "be cancelled, or was cancelled already.")
    add_app_options(cancel, level="WARNING")
    cancel.add_argument("--running", action="store_true",
                        help="also stop tasks that have started")
    cancel.add_argument("--json", action="store_true", help="print JSON")
    takes_words(cancel)
    cancel.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if not args.words:
        raise ConfigurationError(f"name the task ids to cancel (usage: {USAGE})")
    app = load(args.app)
    outcome: Dict[str, str] = {}
    try:
        require_acl(app, ["cancel", "cancel_steps", "cancel_unsent", "request_cancel"], None,
                    "cancel tasks")
        for task_id in args.words:
            handle = app.handle(task_id)
            asked = handle.cancel(running=args.running)
            status = handle.status()
            # a stop asked of a running attempt: it ends cancelled within about a second
            outcome[task_id] = ("stopping" if asked and status == "running"
                                else "already cancelled" if not asked and status == "cancelled"
                                else status)
    finally:
        app.close()
    if args.json:
        emit_json(outcome)
    else:
        for task_id, status in outcome.items():
            if status == "cancelled":
                print(f"{task_id}: cancelled")
            elif status == "already cancelled":
                print(f"{task_id}: not cancelled, it was already cancelled")
            elif status == "stopping":
                print(f"{task_id}: running; asked its worker to stop it")
            elif status == "running":
                print(f"{task_id}: not cancelled, it is running (add --running to stop it)")
            else:
                print(f"{task_id}: not cancelled, it is {status}")
    return 0 if all(status in ("cancelled", "stopping") for status in outcome.values()) else 1
