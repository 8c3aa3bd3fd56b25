"""A few rows of ``minitask bench``, several rounds, medians: the rows the third
performance round's targets 3 and 5 are read from, without the whole bench.

Each round starts a redis-server of its own (the bench's ThrowawayServer) and runs,
with the bench's own code: the bare loops (the drain rows need them), the enqueue
row, the producer row (``delay()`` beside a bare redis-py ``LPUSH`` of the same size,
alternating blocks), then drains of the bench's no-op tasks by ``--pool process`` at
``-c 1`` and ``-c 2`` for each ``--prefetch``. It prints per round and then the
medians of: ``delay()``'s rate as a multiple of the LPUSH loop's and its Redis CPU
against the loop's; each drain's rate, Redis CPU per drained task (the drain window
only; INFO cpu) and worker CPU per task (/proc, the pool's children included).

``--repo`` measures another checkout: the script runs itself again with that
checkout's ``.venv`` Python (or ``--python``) and the checkout first on PYTHONPATH.

Usage: python tools/versus_bullmq/bench_rows.py [--rounds 3] [--tasks 20000]
       [--prefetch 1 --prefetch 100] [--repo PATH] [--python PATH]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
#: set when the script runs itself again for another checkout
AGAIN = "MINITASK_BENCH_ROWS_AGAIN"


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per drain")
    parser.add_argument("--prefetch", type=int, action="append",
                        help="the drains' --prefetch (default 1 and 100)")
    parser.add_argument("--repo", type=Path, default=ROOT,
                        help="the minitask checkout to measure (default: this one)")
    parser.add_argument("--python", help="its Python (default: REPO/.venv/bin/python "
                                         "when there is one, else this one)")
    args = parser.parse_args(argv)
    args.prefetch = args.prefetch or [1, 100]
    args.repo = args.repo.resolve()
    if args.python is None:
        venv = args.repo / ".venv" / "bin" / "python"
        args.python = str(venv) if venv.exists() else sys.executable
    return args


def one_round(args: argparse.Namespace) -> Dict[str, float]:
    from minitask.bench.drain import ThroughputRows
    from minitask.bench.producer import measure_producer
    from minitask.bench.servers import ThrowawayServer
    from minitask.bench.session import Session

    def quiet(line: str) -> None:
        pass

    found: Dict[str, float] = {}
    server = ThrowawayServer(prefix="minitask-bench-rows-")
    try:
        session = Session(server.url, tasks=args.tasks, memory_tasks=0)
        rows = ThroughputRows(session)
        try:
            rows.baselines()
            rows.enqueue()
            delay = measure_producer(server.url, session.app_name, args.tasks, quiet)[0]
            # "0.93 x LPUSH (...); Redis CPU per call 30.1 us against 28.0 us (1.08 x); ..."
            figures = re.search(r"([\d.]+) x LPUSH .*Redis CPU per call ([\d.]+) us against "
                                r"([\d.]+) us \(([\d.]+) x\)", delay["detail"])
            assert figures is not None, delay["detail"]
            found.update({"delay/s": delay["value"], "x LPUSH rate": float(figures[1]),
                          "delay Redis us": float(figures[2]),
                          "LPUSH Redis us": float(figures[3]),
                          "x LPUSH Redis CPU": float(figures[4])})
            for prefetch in args.prefetch:
                for concurrency in (1, 2):
                    rows.drain(concurrency, prefetch)
                    label = f"-c {concurrency} --prefetch {prefetch}"
                    row = session.report.rows[-1]
                    entry = session.report.capacity.entries[-1]
                    found[f"{label} tasks/s"] = row.value
                    # the capacity entry adds delay()'s Redis CPU to the drain's
                    found[f"{label} Redis us"] = entry["redis_us"] - rows.delay_redis_us
                    found[f"{label} worker us"] = entry["worker_us"]
        finally:
            session.cleanup()
    finally:
        server.stop()
    found["load"] = os.getloadavg()[0]
    return found


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse(argv)
    if args.repo != ROOT and not os.environ.get(AGAIN):
        env = dict(os.environ, PYTHONPATH=str(args.repo), **{AGAIN: "1"})
        script = list(argv if argv is not None else sys.argv[1:])
        os.execve(args.python, [args.python, __file__, *script], env)
    sys.path.insert(0, str(args.repo))
    # the bench's worker processes import minitask from the same checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(args.repo), *filter(None, [os.environ.get("PYTHONPATH")])])
    import minitask
    print(f"minitask from {Path(minitask.__file__).parent}; {args.tasks:,} tasks per drain, "
          f"{args.rounds} rounds; load average {os.getloadavg()}", flush=True)
    rounds: List[Dict[str, Any]] = []
    for index in range(args.rounds):
        found = one_round(args)
        rounds.append(found)
        figures = ", ".join(f"{name} {value:,.2f}" for name, value in found.items())
        print(f"round {index + 1}: {figures}", flush=True)
    print("\nmedians:")
    for name in rounds[0]:
        values = [found[name] for found in rounds]
        print(f"  {name:32} {statistics.median(values):10,.2f}   "
              f"({min(values):,.2f} - {max(values):,.2f})")


if __name__ == "__main__":
    main()
