"""``minitask bench``: throughput, latency and memory on a Redis of its own."""
from __future__ import annotations

import argparse
from typing import Any

from .options import Bounded, add_log_options

#: The most tasks a bench run queues (--tasks, --memory-tasks).
MOST_TASKS = 100_000_000


def register(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="measure throughput, latency and memory",
        description="Measure this machine: tasks a second through real workers, latency, "
        "and the Redis memory queued tasks take, against a throwaway redis-server "
        "(--start-server) or the Redis --broker names (under keys of its own, deleted "
        "after; it loads that Redis hard: not a production one).")
    # (no default read here: an explicit --broker with --start-server is refused)
    bench.add_argument("--broker",
                       help="Redis URL to measure against (default: MINITASK_BROKER_URL)")
    bench.add_argument("--start-server", action="store_true",
                       help="start a throwaway redis-server on a free port and use it "
                            "(not with --broker)")
    bench.add_argument("--tasks", type=Bounded(1, MOST_TASKS), default=20_000,
                       help="tasks per throughput run (default 20,000)")
    bench.add_argument("--memory-tasks", type=Bounded(1, MOST_TASKS), default=1_000_000,
                       help="tasks queued for the memory rows (default 1,000,000)")
    bench.add_argument("--scaling", action="store_true",
                       help="also measure 1/2/4/8 processes, delayed backlog, queue length")
    bench.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    bench.add_argument("--json", action="store_true", help="print JSON")
    add_log_options(bench)
    bench.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    from ..bench.interrupts import interruptible
    from ..bench.run import run_bench  # the bench's own imports only when it runs
    # SIGTERM ends the bench as Ctrl-C does: its workers (in sessions of their own) are
    # stopped and its keys deleted; by default it ended the bench alone, and left the
    # workers serving the user's Redis for good
    with interruptible():
        met = run_bench(args.broker, start_server=args.start_server, tasks=args.tasks,
                        memory_tasks=args.memory_tasks, scaling=args.scaling, emit=print,
                        as_json=args.json)
    return 1 if args.check and not met else 0
