"""Where a drain's time goes, thread by thread: computing, waiting for a core, or
waiting for something else (a socket, a lock, a timer).

Fills a queue with ``--tasks`` calls of ``tests.apps.drain``'s ``--task``, starts one
worker with the options given and, from its first task taken to the queue empty,
reads the scheduler's own account of each of its threads and of the redis-server's
(``/proc/<pid>/task/<tid>/schedstat``: time on a CPU, time runnable but waiting
for one). What is neither was spent blocked. On a loaded machine the run-queue
share grows with the load; the blocked share is what the worker waits on (its
round trips, a lock, a sleep), so a thread that is seldom blocked is bound by its
CPU, not by waiting. Threads busy under 1 % of the drain are left out.

Usage: python tools/thread_times.py [--task anoop] [--tasks 20000]
       -- --pool asyncio -c 2 --prefetch 1
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from minitask.broker.keys import queue_keys  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402
from tools.pool_drain import fill, tree, until  # noqa: E402

#: a thread's (name, ns on a CPU, ns runnable waiting for one, voluntary switches)
Times = Tuple[str, int, int, int]


def threads(pid: int) -> Dict[str, Times]:
    found: Dict[str, Times] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, queued, _ = (int(n) for n in (task / "schedstat").read_text().split())
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        switches = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        found[f"{pid}/{task.name}"] = (name, ran, queued, switches)
    return found


def report(label: str, before: Dict[str, Times], after: Dict[str, Times],
           wall: float, tasks: int) -> List[str]:
    lines = []
    for tid, (name, ran, queued, switches) in after.items():
        if tid not in before:
            continue
        cpu, runq = (ran - before[tid][1]) / 1e9, (queued - before[tid][2]) / 1e9
        if cpu < 0.01 * wall:
            continue
        blocked = max(0.0, wall - cpu - runq)
        lines.append(f"  {label} {tid} {name:16s} cpu {cpu / wall:6.1%}  run queue "
                     f"{runq / wall:6.1%}  blocked {blocked / wall:6.1%}  "
                     f"cpu/task {cpu / tasks * 1e6:6.1f} us  blocked/task "
                     f"{blocked / tasks * 1e6:6.1f} us  waits/task "
                     f"{(switches - before[tid][3]) / tasks:.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="anoop", choices=("incr", "noop", "anoop"))
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("options", nargs="*", help="the worker's options, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            client = server.client()
            redis_pid = int(client.info("server")["process_id"])
            fill(server, args.task, args.tasks)
            messages = queue_keys("drain", "default").messages
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            worker = subprocess.Popen(
                [sys.executable, "-m", "minitask", "worker", "-A", "tests.apps.drain",
                 "--loglevel", "WARNING", *args.options], cwd=ROOT, env=env)
            try:
                until(lambda: client.hlen(messages) < args.tasks, 60.0,
                      "the worker took no task", 0.0005)
                start = time.perf_counter()
                pids = tree(worker.pid)
                before = [threads(pid) for pid in pids] + [threads(redis_pid)]
                left = client.hlen(messages)
                until(lambda: not client.hlen(messages), max(300.0, args.tasks / 20),
                      "the worker did not drain in time", 0.002)
                wall = time.perf_counter() - start
                after = [threads(pid) for pid in pids] + [threads(redis_pid)]
            finally:
                worker.terminate()
                worker.wait(timeout=60)
        finally:
            server.stop()
    print(f"{' '.join(args.options)}: {left / wall:,.0f} tasks/s over {wall:.2f} s, "
          f"load average {os.getloadavg()[0]:.1f}")
    for index, (old, new) in enumerate(zip(before, after)):
        label = "redis " if index == len(before) - 1 else "worker"
        print("\n".join(report(label, old, new, wall, left)))


if __name__ == "__main__":
    main()
