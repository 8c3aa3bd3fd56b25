"""``minitask shutdown``: stop running workers from anywhere, as SIGTERM would."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, List

from ..admin import shutdown, stoppable_workers, worker_listing
from ..admin.workers import named_workers, unknown_workers
from ..printable import printable
from ..wire.message import MAX_SECONDS
from .options import Bounded, add_app_options, add_yes, confirmed, load, takes_words

USAGE = "minitask shutdown -A APP (WORKER... | --all --yes) [--wait S]"


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "shutdown", usage=USAGE, help="stop running workers gracefully, through Redis",
        description="Ask workers (by name, as minitask status lists them: a worker's "
        "--name, which stops every worker of that name, or its id) to stop as on "
        "SIGTERM: they stop fetching, let running tasks finish within their --grace, give "
        "back the rest and exit 0. Each hears of it at once.")
    add_app_options(parser, level="WARNING")
    parser.add_argument("--all", action="store_true", help="every live worker of the app")
    add_yes(parser, "every live worker (--all)")
    parser.add_argument("--wait", type=Bounded(0, MAX_SECONDS, seconds=True),
                        default=0.0, metavar="S",
                        help="wait up to S seconds for them to be gone; exit 1 if one is not")
    takes_words(parser)
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    try:
        listed = worker_listing(app)
        live = listed.live + listed.ahead  # stoppable_workers: the clock-ahead ones too
        unknown = unknown_workers(live, args.words)
        if unknown and not args.all:  # something named was not found: exit 1, as documented
            print(f"minitask: error: no live worker of app {app.name!r} is named "
                  f"{', '.join(map(repr, unknown))}; live workers: {named_workers(live)}",
                  file=sys.stderr)
            return 1
        if args.all:
            confirmed(args, f"stops all {_counted(len(listed.live), len(listed.ahead))} "
                            f"of app {app.name!r}")
        refused: List[str] = []
        asked = shutdown(app, args.words, every=args.all, refused=refused)
        called = {info["id"]: info["name"] for info in live}
        for worker_id in asked:
            shown = called.get(worker_id, worker_id)
            print(printable(f"asked worker {shown} to stop" if shown == worker_id
                            else f"asked worker {shown} ({worker_id}) to stop"))
        for error in refused:  # each named; the others were asked all the same
            print(f"minitask: error: {error}", file=sys.stderr)
        if not asked and not refused:
            print(f"no live worker of app {app.name!r}")
        deadline = time.monotonic() + max(0.0, args.wait)
        remaining = set(asked)
        while args.wait > 0 and remaining:
            remaining &= {info["id"] for info in stoppable_workers(app)}
            if not remaining or time.monotonic() >= deadline:
                break
            time.sleep(0.1)  # a person waits for processes to exit; not a worker's path
    finally:
        app.close()
    if args.wait > 0:
        for name in sorted(called.get(worker_id, worker_id) for worker_id in remaining):
            print(f"worker {printable(name)} is still running after {args.wait:g} s (running "
                  f"tasks get their grace)")
    if refused:  # as a BrokerError exits (cli/main.py)
        return 3
    return 1 if args.wait > 0 and remaining else 0


def _counted(live: int, ahead: int) -> str:
    """The workers ``--all`` asks, counted as ``minitask status`` does: records whose
    heartbeat lies ahead of this machine's clock are not live there, but are asked too
    (a real worker whose clock runs fast must still be stoppable)."""
    counted = f"{live} live worker(s)"
    return counted if not ahead else (
        f"{counted} and {ahead} whose clock runs ahead (status lists it apart, not live)"
        if ahead == 1 else
        f"{counted} and {ahead} whose clocks run ahead (status lists them apart, not live)")
