"""Drain rates of fair queues (docs/guide/fair-queues.rst, "What it costs").

Runs rounds of three drains of the same number of no-op tasks on a redis-server
this script starts, by one real worker process (``python -m minitask worker -A
tests.apps.fair``, the same options each time):

* ``ungrouped``: ``plain_noop``, no group;
* ``groups of one``: ``grouped_noop``, every task its own group;
* ``one group``: ``grouped_noop``, every task in one group.

Each drain is timed from the worker's first task taken to the queue empty, and
Redis's own time in commands (``INFO commandstats``, this script's polling left
out), its commands, the CPU time of the redis-server process (``INFO cpu``:
user and system, the polling included) and that of the worker process and its
pool's children (``/proc``, Linux) are read before and after: counts and CPU
time a task, which the machine's load does not change as it changes rates (on
a machine of two cores, Redis's CPU and the worker's share them).
The sends' Redis CPU a task (``INFO cpu`` around the queue's filling, by
``delay_many`` calls of 1,000) is printed beside each drain's.
Prints each drain (a grouped one with its rate as a share of the same round's
first mode's), then the medians, each grouped median as a share of the ungrouped
one, and the median of the rounds' own ratios (a round's drains run back to back,
so a load that changes from round to round moves it less).

Usage: python tools/fair_drain.py [--tasks 100000] [--rounds 3] [-c 1] [--prefetch 10]
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
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from minitask.broker.keys import queue_keys  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402

MODES = ("ungrouped", "groups of one", "one group")
#: print Redis's time by command after each drain (--breakdown)
BREAKDOWN = False


def script_time(client: "object") -> Tuple[float, int, Dict[str, Tuple[float, int]]]:
    """Microseconds Redis spent in commands so far (scripts included), its calls, and
    both by command."""
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    spent, calls, by_command = 0.0, 0, {}
    for name, stat in stats.items():
        if name.startswith("cmdstat_") and name not in ("cmdstat_hlen", "cmdstat_info"):
            spent += float(stat["usec"])
            calls += int(stat["calls"])
            by_command[name[8:]] = (float(stat["usec"]), int(stat["calls"]))
    return spent, calls, by_command


def redis_cpu(client: "object") -> float:
    """Seconds of CPU the redis-server process has used (user and system)."""
    cpu = client.info("cpu")  # type: ignore[attr-defined]
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def tree_cpu(pid: int) -> float:
    """Seconds of CPU (user and system) process ``pid`` and its live descendants have
    used, read from ``/proc`` (0 where it is not there: not Linux)."""
    try:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    text = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue  # ended meanwhile
                fields = text[text.rindex(")") + 2:].split()  # after the command's name
                stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    except OSError:
        return 0.0
    ticks, found, pending = 0, set(), [pid]
    while pending:
        current = pending.pop()
        if current in found or current not in stats:
            continue
        found.add(current)
        ticks += stats[current][1]
        pending.extend(child for child, (parent, _) in stats.items() if parent == current)
    return ticks / os.sysconf("SC_CLK_TCK")


def fill(url: str, mode: str, tasks: int) -> None:
    os.environ["MINITASK_BROKER_URL"] = url
    from tests.apps import fair
    task = fair.plain_noop if mode == "ungrouped" else fair.grouped_noop
    batch = 1000
    for start in range(0, tasks, batch):
        calls = [(f"t{n}" if mode == "groups of one" else "one", n)
                 for n in range(start, min(tasks, start + batch))]
        task.delay_many(calls)


def drain(server: RedisServer, mode: str, tasks: int,
          worker_options: List[str]) -> Dict[str, float]:
    client = server.client()
    client.flushall()
    sent_before = redis_cpu(client)
    fill(server.url, mode, tasks)
    send_cpu = (redis_cpu(client) - sent_before) * 1e6 / tasks
    messages = queue_keys("fair", "default").messages
    assert client.hlen(messages) == tasks, (mode, client.hlen(messages))
    env = dict(os.environ, MINITASK_BROKER_URL=server.url, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "minitask", "worker", "-A",
                               "tests.apps.fair", "--loglevel", "WARNING", *worker_options],
                              cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        while client.hlen(messages) >= tasks:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"{mode}: the worker took no task")
            time.sleep(0.0005)
        start = time.perf_counter()
        redis_before = script_time(client)
        cpu_before = redis_cpu(client)
        worker_before = tree_cpu(worker.pid)
        deadline = time.monotonic() + max(600.0, tasks / 50)
        while client.hlen(messages):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{mode}: not drained in time")
            time.sleep(0.005)
        elapsed = time.perf_counter() - start
        redis_after = script_time(client)
        cpu_after = redis_cpu(client)
        worker_after = tree_cpu(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    left = [key for key in client.scan_iter(match="*g:*", count=1000)]
    spent = redis_after[0] - redis_before[0]
    if BREAKDOWN:
        before = redis_before[2]
        rows = sorted(((usec - before.get(name, (0.0, 0))[0], calls - before.get(name, (0.0, 0))[1],
                        name) for name, (usec, calls) in redis_after[2].items()), reverse=True)
        print(f"  {mode}: " + ", ".join(f"{name} {usec / tasks:.1f} us {calls / tasks:.2f}x"
                                        for usec, calls, name in rows if calls), flush=True)
    return {"rate": tasks / elapsed, "seconds": elapsed,
            "redis_us_per_task": spent / tasks,
            "redis_calls_per_task": (redis_after[1] - redis_before[1]) / tasks,
            "redis_cpu_us_per_task": (cpu_after - cpu_before) * 1e6 / tasks,
            "worker_cpu_us_per_task": (worker_after - worker_before) * 1e6 / tasks,
            "send_cpu_us_per_task": send_cpu,
            "group_keys_left": float(len(left))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-c", "--concurrency", default="1")
    parser.add_argument("--prefetch", default="10")
    parser.add_argument("--pool", default="process")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--breakdown", action="store_true",
                        help="print Redis's time by command after each drain")
    args = parser.parse_args()
    global BREAKDOWN
    BREAKDOWN = args.breakdown
    modes = args.modes.split(",")
    options = ["--pool", args.pool, "-c", args.concurrency, "--prefetch", args.prefetch]
    results: Dict[str, List[Dict[str, float]]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            version = server.client().info("server")["redis_version"]
            print(f"redis-server {version}, {args.tasks:,} tasks, worker {' '.join(options)}, "
                  f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
            for round_ in range(args.rounds):
                for mode in modes:
                    result = drain(server, mode, args.tasks, options)
                    results[mode].append(result)
                    print(f"round {round_ + 1} {mode:14} {result['rate']:8.0f} tasks/s "
                          f"({result['seconds']:.1f} s), Redis "
                          f"{result['redis_us_per_task']:.1f} us/task in "
                          f"{result['redis_calls_per_task']:.2f} calls, CPU "
                          f"{result['redis_cpu_us_per_task']:.1f} us/task, worker CPU "
                          f"{result['worker_cpu_us_per_task']:.1f} us/task, sends' Redis CPU "
                          f"{result['send_cpu_us_per_task']:.1f} us/task, group keys left "
                          f"{result['group_keys_left']:.0f}, load {os.getloadavg()[0]:.2f}"
                          + (f", {result['rate'] / results[modes[0]][-1]['rate']:.2f} x "
                             f"this round's {modes[0]}" if mode != modes[0] else ""),
                          flush=True)
        finally:
            server.stop()
    base = statistics.median(r["rate"] for r in results[modes[0]])
    cpu_base = statistics.median(r["redis_cpu_us_per_task"] for r in results[modes[0]])
    worker_base = statistics.median(r["worker_cpu_us_per_task"] for r in results[modes[0]])
    send_base = statistics.median(r["send_cpu_us_per_task"] for r in results[modes[0]])
    for mode in modes:
        rate = statistics.median(r["rate"] for r in results[mode])
        script = statistics.median(r["redis_us_per_task"] for r in results[mode])
        calls = statistics.median(r["redis_calls_per_task"] for r in results[mode])
        cpu = statistics.median(r["redis_cpu_us_per_task"] for r in results[mode])
        worker = statistics.median(r["worker_cpu_us_per_task"] for r in results[mode])
        send = statistics.median(r["send_cpu_us_per_task"] for r in results[mode])
        # each round's drains run back to back: the median of the rounds' own ratios
        # is less moved by a load that changes from round to round
        paired = statistics.median(r["rate"] / b["rate"]
                                   for r, b in zip(results[mode], results[modes[0]]))
        print(f"median {mode:14} {rate:8.0f} tasks/s = {rate / base:.2f} x {modes[0]} "
              f"(rounds' ratios: median {paired:.2f}); "
              f"Redis {script:.1f} us/task in {calls:.2f} calls, CPU {cpu:.1f} us/task "
              f"= {cpu / cpu_base:.2f} x {modes[0]}; worker CPU {worker:.1f} us/task"
              + (f" = {worker / worker_base:.2f} x {modes[0]}" if worker_base else "")
              + f"; sends' Redis CPU {send:.1f} us/task = {send / send_base:.2f} x {modes[0]}")


if __name__ == "__main__":
    main()
