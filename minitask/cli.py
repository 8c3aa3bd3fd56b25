"""The ``minitask`` command: worker, status and bench. The only place that sets up logging."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

from .app import Minitask
from .discovery import load_app, load_task_plugins
from .errors import AppNotFound, BrokerError, ConfigurationError, MinitaskError

logger = logging.getLogger("minitask")

#: Error type -> exit code; the first match wins.
EXIT_CODES: Tuple[Tuple[Type[BaseException], int], ...] = (
    (AppNotFound, 2),
    (ConfigurationError, 2),
    (BrokerError, 3),
    (MinitaskError, 1),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.command
    return run(lambda: command(args), getattr(args, "loglevel", "INFO"))


def run(command: Callable[[], int], loglevel: str) -> int:
    """Set up logging, run a command, and turn its errors into exit codes."""
    logging.basicConfig(level=loglevel.upper(),
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # -A names modules of the project being run
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except MinitaskError as exc:
        for error_type, code in EXIT_CODES:
            if isinstance(exc, error_type):
                print(f"minitask: error: {exc}", file=sys.stderr)
                return code
        raise  # pragma: no cover - MinitaskError is always matched above


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minitask", description="Run and inspect minitask "
                                     "workers.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    worker = commands.add_parser("worker", help="run tasks")
    _app_options(worker)
    worker.add_argument("-Q", "--queues", help="comma-separated queues, served in this order "
                        "(default: the default queue, then every queue the tasks name)")
    worker.add_argument("-c", "--concurrency", type=int, default=None,
                        help="tasks run at once (default: CPU count for processes, 1 for threads)")
    worker.add_argument("--pool", choices=("process", "thread"), default="process")
    worker.add_argument("--burst", action="store_true",
                        help="run what is ready, then exit 0")
    worker.add_argument("--grace", type=float, default=30.0,
                        help="seconds running tasks get to finish on SIGTERM/SIGINT")
    worker.add_argument("--prefetch", type=int, default=None,
                        help="tasks each process leases per round trip (default: the app's "
                        "prefetch, 1); more is faster, but up to that many tasks can run "
                        "ahead of a higher-priority one")
    worker.set_defaults(command=_worker)

    status = commands.add_parser("status", help="show queues and live workers")
    _app_options(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(command=_status)

    bench = commands.add_parser("bench", help="measure throughput, latency and memory")
    bench.add_argument("--broker", default=os.environ.get("MINITASK_BROKER_URL"),
                       help="Redis URL to measure against (default: MINITASK_BROKER_URL)")
    bench.add_argument("--start-server", action="store_true",
                       help="start a throwaway redis-server on a free port and use it")
    bench.add_argument("--tasks", type=int, default=20_000,
                       help="tasks per throughput run (default 20,000)")
    bench.add_argument("--memory-tasks", type=int, default=1_000_000,
                       help="tasks queued for the memory rows (default 1,000,000)")
    bench.add_argument("--scaling", action="store_true",
                       help="also measure 1/2/4/8 processes, delayed backlog, queue length")
    bench.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    bench.add_argument("--json", action="store_true", help="print JSON")
    bench.add_argument("--loglevel", default="INFO")
    bench.set_defaults(command=_bench)
    return parser


def _app_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-A", "--app", required=True,
                        help="an entry point of minitask.apps, a module, or module:attribute")
    parser.add_argument("--loglevel", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR", "debug", "info",
                                 "warning", "error"))


def _load(spec: str) -> Minitask:
    app = load_app(spec)
    for module in load_task_plugins(app):
        logger.debug("imported task plugin %s", module)
    return app


def _worker(args: argparse.Namespace) -> int:
    app = _load(args.app)
    queues = [q.strip() for q in args.queues.split(",") if q.strip()] if args.queues else None
    concurrency = args.concurrency
    if concurrency is None:
        concurrency = (os.cpu_count() or 1) if args.pool == "process" else 1
    try:
        app.worker(queues=queues, concurrency=concurrency, pool=args.pool, burst=args.burst,
                   grace=args.grace, prefetch=args.prefetch).run()
    finally:
        app.close()
    return 0


def _status(args: argparse.Namespace) -> int:
    app = _load(args.app)
    broker = app.broker
    queues = sorted(set(broker.queues.queue_names()) | set(app.worker_queues()))
    now_ms = app.clock.now_ms()
    report: Dict[str, Any] = {
        "app": app.name, "broker": broker.description,
        "queues": {queue: broker.queues.counts(queue) for queue in queues},
        "workers": [],
    }
    for info in broker.registry.live(now_ms, live_ms=60_000):
        report["workers"].append({
            "name": info["name"], "host": info.get("host", ""), "pid": info.get("pid", ""),
            "queues": info.get("queues", ""), "pool": info.get("pool", ""),
            "heartbeat_age_s": round((now_ms - int(info.get("beat_ms", now_ms))) / 1000.0, 3),
            "processed": int(info.get("processed", 0)), "failed": int(info.get("failed", 0)),
            "running": int(info.get("running", 0)),
        })
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(_status_text(report))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import run_bench
    met = run_bench(args.broker, start_server=args.start_server, tasks=args.tasks,
                    memory_tasks=args.memory_tasks, scaling=args.scaling, emit=print,
                    as_json=args.json)
    return 1 if args.check and not met else 0


def _status_text(report: Dict[str, Any]) -> str:
    lines: List[str] = [f"app {report['app']} on {report['broker']}", "",
                        f"{'queue':<20} {'ready':>7} {'scheduled':>9} {'running':>7} "
                        f"{'dead':>6}  ready by priority"]
    for queue, counts in report["queues"].items():
        by_priority = " ".join(f"p{p}={n}" for p, n in counts["ready_by_priority"].items())
        lines.append(f"{queue:<20} {counts['ready']:>7} {counts['scheduled']:>9} "
                     f"{counts['running']:>7} {counts['dead']:>6}  {by_priority or '-'}")
    lines += ["", f"{len(report['workers'])} live worker(s)"]
    for worker in report["workers"]:
        lines.append(f"  {worker['name']}  heartbeat {worker['heartbeat_age_s']:.1f} s ago  "
                     f"processed {worker['processed']}  failed {worker['failed']}  "
                     f"running {worker['running']}  queues {worker['queues']}")
    return "\n".join(lines)
