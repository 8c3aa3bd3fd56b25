"""``minitask unsubscribe``: remove a subscriber of a queue's broadcast calls."""
from __future__ import annotations

import argparse
from typing import Any

from ..admin.subscriptions import unsubscribed
from .options import add_app_options, check_given, known, load


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "unsubscribe", help="remove a subscriber of a queue's broadcast calls",
        description="Remove a subscriber (a worker name) gone for good: broadcast calls "
        "stop waiting for it, and those only it had not pulled are deleted. A worker of "
        "that name still running subscribes again at its next look (within about 5 s "
        "when idle), from the next call sent: a call sent in between is not run by that "
        "name, and reaches nobody if it was the queue's only subscriber. Stop the "
        "name's workers first (minitask shutdown), or accept the gap.")
    add_app_options(parser, level="WARNING")
    parser.add_argument("queue", help="the queue of the broadcast tasks")
    parser.add_argument("name", help="the subscriber, as minitask status lists it")
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    check_given("queue", args.queue)
    app = load(args.app)
    try:
        gone, unconfirmed = unsubscribed(app, args.queue, args.name)
        if gone:
            note = " (unconfirmed by replicas: may not survive a failover)" if unconfirmed else ""
            print(f"unsubscribed {args.name} from the broadcasts of queue {args.queue}{note}")
            return 0
        if not known(app, args.queue):  # not "not a subscriber" of a queue that is none
            return 1
        print(f"{args.name} is not a subscriber of queue {args.queue}")
        return 1
    finally:
        app.close()
