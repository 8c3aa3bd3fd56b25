"""``minitask worker``: run tasks."""
from __future__ import annotations

import argparse
import os
from typing import Any, List, Optional

from ..printable import own_logger
from ..wire.message import MAX_SECONDS
from ..worker.broadcasts import check_subscriber
from ..worker.leftovers import exit_past_leftovers
from ..worker.loop import MAX_CONCURRENCY, MAX_PREFETCH
from ..worker.stray import stray_output_logged
from .options import Bounded, add_app_options, load

logger = own_logger(__name__)

#: Coroutines an asyncio worker runs at once unless -c says otherwise.
ASYNCIO_CONCURRENCY = 100
#: The most --max-tasks-per-child and --max-memory-per-child (MB) take.
MOST_PER_CHILD = 1_000_000_000


def register(commands: Any) -> None:
    worker = commands.add_parser(
        "worker", help="run tasks",
        description="Run the app's tasks: lease them from its queues, run them on a pool "
        "of processes, threads or coroutines, and record their outcomes, until SIGTERM, "
        "SIGINT or minitask shutdown stops it (with --burst: once nothing is ready).")
    add_app_options(worker)
    worker.add_argument("-Q", "--queues", type=queue_list,
                        help="comma-separated queues, served in this order (default: the "
                        "default queue, then every queue the tasks or the routes name)")
    worker.add_argument("-c", "--concurrency",
                        type=Bounded(1, max(MAX_CONCURRENCY.values())), default=None,
                        help="tasks run at once (default: CPU count for processes, 1 for "
                        "threads, 100 for asyncio; at most 256 processes, 1,000 threads or "
                        "10,000 coroutines per worker: past that, start more workers)")
    worker.add_argument("--pool", choices=("process", "thread", "asyncio"), default="process",
                        help="what runs the tasks: child processes (default; a crash or a "
                        "timeout kills only its child), threads of the worker (for I/O), or "
                        "coroutines on one event loop (for async def tasks)")
    worker.add_argument("--burst", action="store_true",
                        help="run what is ready, then exit 0")
    worker.add_argument("--grace", type=Bounded(0, MAX_SECONDS, seconds=True), default=30.0,
                        help="seconds running tasks get to finish on SIGTERM/SIGINT")
    worker.add_argument("--prefetch", type=Bounded(1, MAX_PREFETCH), default=None,
                        help="tasks each process leases per round trip (default: the app's "
                        "prefetch, 1); more is faster, but up to that many tasks can run "
                        "ahead of a higher-priority one")
    worker.add_argument("--name", default=None,
                        help="the worker's name, everywhere: in minitask status, the "
                        "dashboard, minitask shutdown NAME, the record of recent outcomes, "
                        "and as the subscriber it runs broadcast calls as (workers sharing "
                        "a name run each call once between them). Default: its id (host, "
                        "pid, random part) and the host name as subscriber; shutdown takes "
                        "the id too")
    worker.add_argument("--max-tasks-per-child", type=Bounded(1, MOST_PER_CHILD),
                        default=None, metavar="N",
                        help="process pool: replace a child once it has handled N tasks, "
                        "between two of them (for tasks that leak memory or files)")
    worker.add_argument("--max-memory-per-child", type=Bounded(1, MOST_PER_CHILD),
                        default=None, metavar="MB",
                        help="process pool: replace a child whose resident memory exceeds "
                        "MB megabytes after a task (the task finishes first)")
    worker.set_defaults(command=run)


def queue_list(text: str) -> List[str]:
    """``-Q``'s queues: each once, in the order first named (-Q a,a served a twice,
    listed it twice). None at all (``-Q ""``, ``-Q ,``) is a bad command line (exit 2):
    it served the default queues, as if -Q were not given."""
    queues = list(dict.fromkeys(q.strip() for q in text.split(",") if q.strip()))
    if not queues:
        raise argparse.ArgumentTypeError(f"{text!r} names no queue: give one or more "
                                         f"comma-separated queue names, or leave -Q out "
                                         f"to serve the default ones")
    return queues


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    queues: Optional[List[str]] = args.queues
    concurrency = args.concurrency
    if concurrency is None:
        concurrency = {"process": os.cpu_count() or 1, "asyncio": ASYNCIO_CONCURRENCY}.get(
            args.pool, 1)
    for queue in queues or ():
        app.check_queue_name(queue)  # a bad name is a bad argument, before the app warns
    # the app's threads and warnings, until the process ends: escaped log lines
    with stray_output_logged():
        try:
            if args.name is not None:  # the worker's name and its subscriber's: checked as one
                check_subscriber(args.name, "worker")
            app.worker(queues=queues, concurrency=concurrency, pool=args.pool, burst=args.burst,
                       grace=args.grace, prefetch=args.prefetch, subscriber=args.name,
                       max_tasks_per_child=args.max_tasks_per_child,
                       max_memory_per_child=args.max_memory_per_child, name=args.name).run()
        finally:
            app.close()
        exit_past_leftovers(0)  # threads a task left running must not keep a stopped worker
    return 0
