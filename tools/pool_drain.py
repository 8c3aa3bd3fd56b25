"""Drain rates of one worker process by pool, and what each task costs Redis.

Runs rounds of drains of the same number of tasks (``tests.apps.drain``: ``incr``
makes one Redis INCR, ``noop``/``anoop`` nothing) on a redis-server this script
starts, by one real worker process with the options given. Each drain is timed
from the worker's first task taken to the queue empty; beside it, Redis's CPU
(``INFO cpu``), its calls (``INFO commandstats``, this script's polling left out),
and the worker's CPU (user and system, its children's included) and context
switches (``/proc``), per task.

Usage: python tools/pool_drain.py [--task incr] [--tasks 20000] [--rounds 3]
       [--pool thread] [-c 2] [--prefetch 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from minitask.broker.keys import queue_keys  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402

#: commands this script sends while it polls: left out of the counts
POLLING = ("cmdstat_hlen", "cmdstat_info", "cmdstat_flushall", "cmdstat_ping")


def calls(client: "object") -> Dict[str, int]:
    """Calls by command so far, this script's own left out."""
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    return {name[8:]: int(stat["calls"]) for name, stat in stats.items()
            if name.startswith("cmdstat_") and name not in POLLING}


def cpu(client: "object") -> float:
    info = client.info("cpu")  # type: ignore[attr-defined]
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def switches(pids: Sequence[int]) -> int:
    """Voluntary context switches so far (a thread waited: for a lock, the GIL, a
    socket) of the processes ``pids`` and all their threads; the others are the
    machine's load."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[-1])
    return total


def cpu_of(pids: Sequence[int]) -> Tuple[float, float]:
    """CPU seconds so far of the processes ``pids``: (user, system)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user += int(fields[11]) / tick
        system += int(fields[12]) / tick
    return user, system


def tree(pid: int) -> List[int]:
    found = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found.extend(tree(int(child)))
    return found


def until(done: Callable[[], bool], seconds: float, why: str, every: float) -> None:
    """Poll ``done`` every ``every`` seconds for at most ``seconds``; RuntimeError(why)
    after. (Each poll is a Redis call: its CPU counts in the server's.)"""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(why)
        time.sleep(every)


def fill(server: RedisServer, task: str, tasks: int) -> None:
    """Empty ``server`` and enqueue ``tasks`` calls of tests.apps.drain's ``task``."""
    server.client().flushall()
    os.environ["MINITASK_BROKER_URL"] = server.url
    from tests.apps import drain as apps
    func = getattr(apps, task)
    for start in range(0, tasks, 1000):
        func.delay_many([(n,) for n in range(start, min(tasks, start + 1000))])


def drain(server: RedisServer, task: str, tasks: int, options: List[str]) -> Dict[str, float]:
    client = server.client()
    fill(server, task, tasks)
    messages = queue_keys("drain", "default").messages
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "minitask", "worker", "-A",
                               "tests.apps.drain", "--loglevel", "WARNING", *options],
                              cwd=ROOT, env=env)
    try:
        until(lambda: client.hlen(messages) < tasks or worker.poll() is not None, 60.0,
              "the worker took no task", 0.0005)
        if worker.poll() is not None:
            raise RuntimeError("the worker ended before it took a task")
        start = time.perf_counter()
        before = (calls(client), cpu(client), switches(tree(worker.pid)),
                  cpu_of(tree(worker.pid)))
        already = tasks - client.hlen(messages)  # drained before the window
        until(lambda: not client.hlen(messages), max(300.0, tasks / 50), "not drained in time",
              0.005)
        elapsed = time.perf_counter() - start
        after = (calls(client), cpu(client), switches(tree(worker.pid)),
                 cpu_of(tree(worker.pid)))
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    counted = tasks - already
    by_command = {name: (n - before[0].get(name, 0)) / counted
                  for name, n in after[0].items() if n - before[0].get(name, 0)}
    return {"rate": counted / elapsed, "redis_us": (after[1] - before[1]) / counted * 1e6,
            "switches": (after[2] - before[2]) / counted,
            "worker_us": (sum(after[3]) - sum(before[3])) / counted * 1e6,
            "user_us": (after[3][0] - before[3][0]) / counted * 1e6,
            "evalsha": by_command.get("evalsha", 0.0),
            "calls": sum(v for k, v in by_command.items() if k != "incr"),
            "detail": by_command}  # type: ignore[dict-item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="incr", choices=("incr", "noop", "anoop"))
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", default="thread")
    parser.add_argument("-c", "--concurrency", default="2")
    parser.add_argument("--prefetch", default="1")
    parser.add_argument("--detail", action="store_true", help="print the calls by command")
    args = parser.parse_args()
    options = ["--pool", args.pool, "-c", args.concurrency, "--prefetch", args.prefetch]
    results: List[Dict[str, float]] = []
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            print(f"{args.tasks:,} {args.task} tasks, worker {' '.join(options)}, "
                  f"{os.cpu_count()} CPUs, loadavg {os.getloadavg()[0]:.2f}", flush=True)
            for round_ in range(args.rounds):
                result = drain(server, args.task, args.tasks, options)
                results.append(result)
                print(f"round {round_ + 1}: {result['rate']:7.0f} tasks/s, Redis "
                      f"{result['redis_us']:.1f} us/task, worker "
                      f"{result['worker_us']:.0f} us/task ({result['user_us']:.0f} user), "
                      f"{result['calls']:.2f} calls/task "
                      f"({result['evalsha']:.2f} scripts), {result['switches']:.1f} "
                      f"voluntary context switches/task, loadavg "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
                if args.detail:
                    print("   ", {k: round(v, 3) for k, v in
                                  result["detail"].items()})  # type: ignore[union-attr]
        finally:
            server.stop()
    print(f"median: {statistics.median(r['rate'] for r in results):.0f} tasks/s, Redis "
          f"{statistics.median(r['redis_us'] for r in results):.1f} us/task, worker "
          f"{statistics.median(r['worker_us'] for r in results):.0f} us/task "
          f"({statistics.median(r['user_us'] for r in results):.0f} user), "
          f"{statistics.median(r['calls'] for r in results):.2f} calls/task, "
          f"{statistics.median(r['switches'] for r in results):.1f} switches/task")


if __name__ == "__main__":
    main()
