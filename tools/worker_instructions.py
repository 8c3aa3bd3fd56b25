"""A worker's instructions per task, counted by valgrind's callgrind: load-free.

CPU time per task moves with the machine's load (caches shared, the other
core's work); an instruction count does not. This runs a burst worker
(``--burst``: it ends once the queue is empty) under callgrind twice, on
``--few`` and on ``--many`` tasks of ``tests.apps.drain`` put in the queue
beforehand, and divides the difference of the two totals (every process of the
worker, a process pool's children included) by the difference in tasks: the
start-up, the same in both runs, drops out. The redis-server is started here.

Counts user-space instructions only: system calls (a socket's, a lock's) are
not in them, and threads run one at a time under valgrind. Slow (the worker
runs some 50 times slower): a few minutes per run.

Usage: python tools/worker_instructions.py [--task noop] [--few 200] [--many 1200]
       -- --pool thread -c 2 --prefetch 1
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from minitask.broker.keys import queue_keys  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402
from tools.pool_drain import fill  # noqa: E402


def counted(directory: Path) -> List[int]:
    """The instructions of each callgrind output file in ``directory``, by process in
    the order they started (the worker first: a process pool's supervisor)."""
    totals = []
    for path in sorted(directory.glob("callgrind.*"), key=lambda p: int(p.suffix[1:])):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                totals.append(int(line.split()[1]))
                break
    return totals


def burst(server: RedisServer, task: str, tasks: int, options: List[str],
          directory: Path) -> List[int]:
    """Instructions of a burst worker that drains ``tasks`` tasks, by process."""
    client = server.client()
    fill(server, task, tasks)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                    f"--callgrind-out-file={directory}/callgrind.%p", sys.executable, "-m",
                    "minitask", "worker", "-A", "tests.apps.drain", "--loglevel", "WARNING",
                    "--burst", *options], cwd=ROOT, env=env, check=True,
                   stderr=subprocess.DEVNULL, timeout=3600)
    if client.hlen(queue_keys("drain", "default").messages):
        raise RuntimeError("the burst worker left tasks in the queue")
    return counted(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="noop", choices=("incr", "noop", "anoop"))
    parser.add_argument("--few", type=int, default=200)
    parser.add_argument("--many", type=int, default=1200)
    parser.add_argument("options", nargs="*", help="the worker's options, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            totals = []
            for tasks in (args.few, args.many):
                out = Path(tempfile.mkdtemp(dir=directory))
                totals.append(burst(server, args.task, tasks, args.options, out))
                print(f"{tasks:,} {args.task} tasks: {sum(totals[-1]):,} instructions",
                      flush=True)
        finally:
            server.stop()
    tasks = args.many - args.few
    print(f"{args.task}, worker {' '.join(args.options)}: "
          f"{(sum(totals[1]) - sum(totals[0])) / tasks:,.0f} instructions per task")
    if len(totals[0]) > 1 and len(totals[0]) == len(totals[1]):
        # a process pool: its supervisor wakes every 0.1 s, however slowly valgrind runs
        # the children, so its share moves with the machine's load; the children's does not
        print(f"  of which the supervisor {(totals[1][0] - totals[0][0]) / tasks:,.0f}, "
              f"the children {(sum(totals[1][1:]) - sum(totals[0][1:])) / tasks:,.0f}")


if __name__ == "__main__":
    main()
