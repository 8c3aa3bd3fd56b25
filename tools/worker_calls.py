"""A worker's Python function calls and system calls per task: load-free.

Runs a burst worker (``--burst``: it ends once the queue is empty) twice, on
``--few`` and on ``--many`` tasks of ``tests.apps.drain`` put in the queue
beforehand, and divides the difference of the two totals by the difference in
tasks: the start-up, the same in both runs, drops out. Every process of the
worker is counted (a process pool's children too). Calls are the Python
functions entered (``sys.setprofile``'s "call" events, every thread); system
calls are strace's (``strace -f -c``), counted in a separate pair of runs so the
profiler's work does not move them. Both are the same whatever the machine's
load. The redis-server is started here.

``--by-function N`` also prints the N functions called most per task (by file,
line and name), from the same two runs: where a task's calls go.

Usage: python tools/worker_calls.py [--task noop] [--few 200] [--many 2200]
       [--no-strace] [--by-function 40] -- --pool thread -c 2 --prefetch 1
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Counter, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from minitask.broker.keys import queue_keys  # noqa: E402
from tests.support.servers import RedisServer, free_port  # noqa: E402
from tools.pool_drain import fill  # noqa: E402

#: Run as ``python -c`` ahead of the worker: counts the Python calls of every thread
#: of this process and of the children it forks, each process's total written to
#: ``$CALLS_DIR/<pid>`` as it exits (``os._exit`` included: a forked child's way out).
COUNTING = r"""
import atexit, collections, json, os, sys, threading
counted = [0]
by_code = collections.Counter()
by_function = bool(os.environ.get("CALLS_BY_FUNCTION"))
# A process pool supervisor's main thread, once in its loop (``_supervise``), does no
# task's work (each child leases, runs and records its own; a child tells it nothing
# of a task without a time limit): it waits for its children's messages, 0.1 s at a
# time, ten turns a second. Those calls go with how long the drain lasts, which the
# machine's load stretches (one pair of drains read 135-169 calls a task at load 12-24,
# 143-144 unloaded): they are counted apart ("supervising"), out of the total.
supervising, apart = [False], [0]
main_thread = [threading.get_ident()]
def profile(frame, event, arg):
    if event == "call":
        if threading.get_ident() == main_thread[0] and (supervising[0] or (
                frame.f_code.co_name == "_supervise" and
                frame.f_code.co_filename.endswith("pools/processes.py"))):
            supervising[0] = True
            apart[0] += 1
            return
        counted[0] += 1
        if by_function:
            by_code[frame.f_code] += 1
    elif event == "return" and supervising[0] and frame.f_code.co_name == "_supervise" and (
            threading.get_ident() == main_thread[0]) and frame.f_code.co_filename.endswith(
                "pools/processes.py"):
        supervising[0] = False
def dump():
    sys.setprofile(None)
    threading.setprofile(None)
    named = collections.Counter()
    for code, n in list(by_code.items()):
        named[f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"] += n
    text = json.dumps({"total": counted[0], "supervising": apart[0], "by": named})
    with open(os.path.join(os.environ["CALLS_DIR"], str(os.getpid())), "w") as out:
        out.write(text)
def reset():
    counted[0] = apart[0] = 0
    supervising[0], main_thread[0] = False, threading.get_ident()
    by_code.clear()
os.register_at_fork(after_in_child=reset)
real_exit = os._exit
def exiting(code):
    dump()
    real_exit(code)
os._exit = exiting
atexit.register(dump)
threading.setprofile(profile)
sys.setprofile(profile)
from minitask.cli import main
sys.exit(main(sys.argv[1:]))
"""


def worker_command(options: List[str]) -> List[str]:
    return ["worker", "-A", "tests.apps.drain", "--loglevel", "WARNING", "--burst",
            *options]


def run(server: RedisServer, task: str, tasks: int, prefix: List[str],
        env: Dict[str, str]) -> None:
    client = server.client()
    fill(server, task, tasks)
    shown = os.environ.get("CALLS_STDERR")  # set: the worker's errors shown
    subprocess.run(prefix, cwd=ROOT, env=env, check=True,
                   stderr=None if shown else subprocess.DEVNULL, timeout=3600)
    if client.hlen(queue_keys("drain", "default").messages):
        raise RuntimeError("the burst worker left tasks in the queue")


def python_calls(server: RedisServer, task: str, tasks: int, options: List[str],
                 by_function: bool = False) -> Tuple[int, Counter[str]]:
    """The Python calls of a burst drain of ``tasks``, and (``by_function``) by function."""
    directory = Path(tempfile.mkdtemp())
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT), CALLS_DIR=str(directory),
                   MINITASK_BROKER_URL=server.url)
        if by_function:
            env["CALLS_BY_FUNCTION"] = "1"
        run(server, task, tasks, [sys.executable, "-c", COUNTING,
                                  *worker_command(options)], env)
        total, by = 0, Counter()  # type: Tuple[int, Counter[str]]
        for path in directory.iterdir():
            counts = json.loads(path.read_text())
            total += counts["total"]
            by.update(counts["by"])
        return total, by
    finally:
        shutil.rmtree(directory)


def short(where: str) -> str:
    """A function's file shortened to what names it: inside the repository, or the
    standard library's or a package's own path."""
    for root in (str(ROOT) + "/", "site-packages/", "lib/python"):
        if root in where:
            return where.split(root, 1)[1]
    return where


def system_calls(server: RedisServer, task: str, tasks: int, options: List[str]) -> int:
    with tempfile.NamedTemporaryFile() as out:
        env = dict(os.environ, PYTHONPATH=str(ROOT), MINITASK_BROKER_URL=server.url)
        run(server, task, tasks, ["strace", "-f", "-c", "-o", out.name, sys.executable,
                                  "-m", "minitask", *worker_command(options)], env)
        text = Path(out.name).read_text()
    total = re.search(r"^-+.*\n.*?\s(\d+)\s+(?:\d+\s+)?total\s*$", text, re.M)
    if total is None:
        raise RuntimeError(f"no total in strace's summary:\n{text}")
    return int(total.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="noop", choices=("incr", "noop", "anoop"))
    parser.add_argument("--few", type=int, default=200)
    parser.add_argument("--many", type=int, default=2200)
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--by-function", type=int, default=0, metavar="N",
                        help="also print the N functions called most per task")
    parser.add_argument("options", nargs="*", help="the worker's options, after --")
    args = parser.parse_args()
    spread = args.many - args.few
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            by_function = bool(args.by_function)
            few, few_by = python_calls(server, args.task, args.few, args.options,
                                       by_function)
            many, many_by = python_calls(server, args.task, args.many, args.options,
                                         by_function)
            print(f"python calls per task: {(many - few) / spread:.2f}", flush=True)
            if by_function:
                many_by.subtract(few_by)
                for where, count in many_by.most_common(args.by_function):
                    print(f"  {count / spread:7.2f}  {short(where)}")
            if not args.no_strace and shutil.which("strace"):
                few = system_calls(server, args.task, args.few, args.options)
                many = system_calls(server, args.task, args.many, args.options)
                print(f"system calls per task: {(many - few) / spread:.2f}", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
