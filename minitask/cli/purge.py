"""``minitask purge``: delete the ready tasks of a queue."""
from __future__ import annotations

import argparse
from typing import Any

from ..admin import purge_ready, queue_counts
from ..errors import ConfigurationError
from .options import (add_app_options, add_yes, confirmed, known, load, require_acl,
                      takes_words)

USAGE = "minitask purge -A APP QUEUE --yes"


def register(commands: Any) -> None:
    purge = commands.add_parser(
        "purge", usage=USAGE, help="delete the ready tasks of a queue",
        description="Delete every ready task of QUEUE for good. Scheduled, running and "
        "dead tasks stay; the status of a deleted task becomes unknown.")
    add_app_options(purge, level="WARNING")
    add_yes(purge, "the whole queue")
    takes_words(purge)
    purge.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if len(args.words) != 1:
        raise ConfigurationError(f"name one queue (usage: {USAGE})")
    queue = args.words[0]
    app = load(args.app)
    try:
        app.check_queue_name(queue)
        if not known(app, queue):  # something named was not found: exit 1, nothing deleted
            return 1
        require_acl(app, ["purge_ready"], queue, f"purge queue {queue!r}")
        if not args.yes:
            ready = queue_counts(app, queue)["ready"]
            confirmed(args, f"deletes the {ready} ready task(s) of queue {queue!r} for good")
        deleted = purge_ready(app, queue)
    finally:
        app.close()
    print(f"deleted {deleted} ready task(s) from queue {queue!r}")
    return 0
