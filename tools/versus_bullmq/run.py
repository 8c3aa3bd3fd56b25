"""Drain the same queue with BullMQ (Node.js) and minitask, alternating, and compare.

Each round starts a redis-server of its own on a free port (the bench's
ThrowawayServer) and runs every contender once per task kind, in an order that
rotates from round to round, so that the machine's load falls on all alike. A run
fills a queue with N jobs first (BullMQ: ``Queue.addBulk``; minitask:
``delay_many()``), then starts the workers and times them from the first job taken
to the queue drained. Per task it reports the rate, the Redis server's CPU
(``INFO cpu`` deltas over the same window) and the workers' CPU (BullMQ: each
process's ``process.cpuUsage`` from its first job to its last completion; minitask:
``/proc`` times of the worker's process tree, its pool's children included). Then
the medians over the rounds.

The minitask side runs from the checkout given by ``--repo`` (default: this one) with
its ``.venv`` when it has one, so the same driver measures another branch:
``python tools/versus_bullmq/run.py --repo ../other-worktree``.

Usage: python tools/versus_bullmq/run.py [--tasks 20000] [--rounds 3]
       [--task incr --task noop] [--only bullmq-1x1 --only process-1 ...]
       [--repo PATH] [--python PATH] [--json FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from minitask.bench.servers import ThrowawayServer  # noqa: E402


@dataclass(frozen=True)
class Contender:
    """One way of draining: BullMQ with ``processes`` node processes at
    ``concurrency`` each, or minitask with ``workers`` worker processes started with
    ``options``."""

    key: str
    label: str
    system: str
    processes: int = 1
    concurrency: int = 1
    options: Sequence[str] = ()
    #: the task of the asyncio pool is a coroutine
    coroutine: bool = False


CONTENDERS = [
    Contender("bullmq-1x1", "BullMQ, 1 process, concurrency 1", "bullmq", 1, 1),
    Contender("bullmq-2x1", "BullMQ, 2 processes, concurrency 1", "bullmq", 2, 1),
    Contender("bullmq-1x2", "BullMQ, 1 process, concurrency 2", "bullmq", 1, 2),
    Contender("process-1", "minitask --pool process -c 1", "minitask", 1,
              options=("--pool", "process", "-c", "1")),
    Contender("process-2", "minitask --pool process -c 2", "minitask", 1,
              options=("--pool", "process", "-c", "2")),
    Contender("2workers-1", "minitask, 2 workers --pool process -c 1", "minitask", 2,
              options=("--pool", "process", "-c", "1")),
    Contender("thread-2", "minitask --pool thread -c 2", "minitask", 1,
              options=("--pool", "thread", "-c", "2")),
    Contender("asyncio-2", "minitask --pool asyncio -c 2", "minitask", 1,
              options=("--pool", "asyncio", "-c", "2"), coroutine=True),
]
BY_KEY = {contender.key: contender for contender in CONTENDERS}

#: the minitask fill, run by the checkout's Python: prints the key that holds the
#: queue's messages until they are acknowledged (the drain is over when it is empty)
FILL = """
import json, sys
import versus_app
from minitask.broker.keys import queue_keys
task, n = getattr(versus_app, sys.argv[1]), int(sys.argv[2])
for start in range(0, n, 1000):
    task.delay_many([(i,) for i in range(start, min(n, start + 1000))])
print(json.dumps({"messages": queue_keys("versus", "default").messages}))
"""
COUNTER = "versus:count"


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task", action="append", choices=("incr", "noop"),
                        help="incr (one Redis INCR per job) or noop; default both")
    parser.add_argument("--only", action="append", choices=sorted(BY_KEY),
                        help="run these contenders only (default: all)")
    parser.add_argument("--repo", type=Path, default=ROOT,
                        help="the minitask checkout to measure (default: this one)")
    parser.add_argument("--python", help="its Python (default: REPO/.venv/bin/python "
                                         "when there is one, else this one)")
    parser.add_argument("--json", type=Path, help="also write every run to this file")
    parser.add_argument("--no-install", action="store_true",
                        help="skip `npm install` (node_modules already there)")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.rounds < 1:
        parser.error("--tasks and --rounds are at least 1")
    args.task = args.task or ["incr", "noop"]
    args.only = [BY_KEY[key] for key in args.only] if args.only else list(CONTENDERS)
    args.repo = args.repo.resolve()
    if args.python is None:
        venv = args.repo / ".venv" / "bin" / "python"
        args.python = str(venv) if venv.exists() else sys.executable
    return args


def until(done: Callable[[], bool], seconds: float, why: str, every: float) -> None:
    """Poll ``done`` every ``every`` s for at most ``seconds``; RuntimeError(why) after."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(why)
        time.sleep(every)


def redis_cpu(client: "redis.Redis[bytes]") -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def tree(pid: int) -> List[int]:
    found = [pid]
    try:
        listing = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in listing:
        found.extend(tree(int(child)))
    return found


def proc_cpu(pids: Sequence[int]) -> float:
    """CPU seconds so far (user and system) of the processes ``pids``, from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def stop(processes: Sequence["subprocess.Popen[bytes]"]) -> None:
    """SIGTERM each process group; SIGKILL those not gone within 30 s."""
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass
class NodeWorker:
    """One node drain.js worker and the last state it reported."""

    process: "subprocess.Popen[bytes]"
    first: Optional[float] = None
    count: int = 0
    last: float = 0.0
    cpu_us: float = 0.0
    started: threading.Event = field(default_factory=threading.Event)

    def read(self, started: threading.Event) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            record = json.loads(line)
            if "first" in record:
                self.first = record["first"]
                started.set()
            else:
                self.count, self.last, self.cpu_us = (record["count"], record["last"],
                                                      record["cpu_us"])


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.node = ["node", str(HERE / "drain.js")]

    def run(self, server: ThrowawayServer, contender: Contender, task: str
            ) -> Dict[str, Any]:
        client = redis.Redis(port=server.port)
        try:
            client.flushall()
            if contender.system == "bullmq":
                result = self._bullmq(server, client, contender, task)
            else:
                result = self._minitask(server, client, contender, task)
            if task == "incr":
                done = int(client.get(COUNTER) or 0)
                if done != self.args.tasks:
                    raise RuntimeError(f"{contender.label}: {done} INCRs for "
                                       f"{self.args.tasks} jobs")
        finally:
            client.close()
        result.update(contender=contender.key, task=task, load=os.getloadavg()[0])
        return result

    def _bullmq(self, server: ThrowawayServer, client: "redis.Redis[bytes]",
                contender: Contender, task: str) -> Dict[str, Any]:
        n = self.args.tasks
        common = ["--port", str(server.port), "--queue", "versus", "--task", task]
        subprocess.run([*self.node, "fill", *common, "--jobs", str(n)], check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
        started = threading.Event()
        workers = [NodeWorker(subprocess.Popen(
            [*self.node, "work", *common, "--concurrency", str(contender.concurrency)],
            stdout=subprocess.PIPE, start_new_session=True))
            for _ in range(contender.processes)]
        try:
            for worker in workers:
                threading.Thread(target=worker.read, args=(started,), daemon=True).start()
            if not started.wait(60):
                raise RuntimeError(f"{contender.label} took no job within 60 s")
            pids = [worker.process.pid for worker in workers]
            redis_before, proc_before = redis_cpu(client), proc_cpu(pids)
            until(lambda: sum(w.count for w in workers) >= n or
                  any(w.process.poll() is not None for w in workers),
                  max(300.0, n / 20), f"{contender.label} did not drain in time", 0.002)
            redis_after, proc_after = redis_cpu(client), proc_cpu(pids)
            if sum(w.count for w in workers) < n:
                raise RuntimeError(f"a worker of {contender.label} ended early")
        finally:
            stop([worker.process for worker in workers])
        first = min(w.first for w in workers if w.first is not None)
        elapsed = max(w.last for w in workers) - first
        return {"rate": n / elapsed, "redis_us": (redis_after - redis_before) / n * 1e6,
                "worker_us": sum(w.cpu_us for w in workers) / n,
                "worker_proc_us": (proc_after - proc_before) / n * 1e6}

    def _minitask(self, server: ThrowawayServer, client: "redis.Redis[bytes]",
                  contender: Contender, task: str) -> Dict[str, Any]:
        n = self.args.tasks
        name = ("a" + task) if contender.coroutine else task
        env = dict(os.environ, MINITASK_BROKER_URL=server.url,
                   PYTHONPATH=os.pathsep.join([str(HERE), str(self.args.repo)]))
        filled = subprocess.run([self.args.python, "-c", FILL, name, str(n)], env=env,
                                cwd=self.args.repo, check=True, capture_output=True,
                                timeout=600)
        messages = json.loads(filled.stdout.decode().strip().splitlines()[-1])["messages"]
        command = [self.args.python, "-m", "minitask", "worker", "-A", "versus_app:app",
                   "--loglevel", "WARNING", "--prefetch", "1", *contender.options]
        workers = [subprocess.Popen(command, env=env, cwd=self.args.repo,
                                    start_new_session=True)
                   for _ in range(contender.processes)]
        try:
            until(lambda: client.hlen(messages) < n or
                  any(w.poll() is not None for w in workers), 60.0,
                  f"{contender.label} took no task within 60 s", 0.0005)
            start = time.perf_counter()
            pids = [pid for worker in workers for pid in tree(worker.pid)]
            redis_before, proc_before = redis_cpu(client), proc_cpu(pids)
            already = n - client.hlen(messages)  # taken before the window opened
            until(lambda: not client.hlen(messages) or
                  any(w.poll() is not None for w in workers),
                  max(300.0, n / 20), f"{contender.label} did not drain in time", 0.002)
            elapsed = time.perf_counter() - start
            pids = sorted({*pids, *(pid for worker in workers for pid in tree(worker.pid))})
            redis_after, proc_after = redis_cpu(client), proc_cpu(pids)
            if client.hlen(messages):
                raise RuntimeError(f"a worker of {contender.label} ended early")
        finally:
            stop(workers)
        counted = n - already
        return {"rate": counted / elapsed,
                "redis_us": (redis_after - redis_before) / counted * 1e6,
                "worker_us": (proc_after - proc_before) / counted * 1e6}


def header(args: argparse.Namespace) -> str:
    def output(command: List[str], cwd: Path = HERE) -> str:
        try:
            return subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                                  timeout=60).stdout.strip()
        except OSError:
            return "?"
    bullmq = output(["node", "-p", "require('bullmq/package.json').version"])
    commit = output(["git", "log", "-1", "--format=%h %s"], cwd=args.repo)[:72]
    python = output([args.python, "-c", "import platform; print(platform.python_version())"])
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{os.cpu_count()} CPUs, {platform.platform()}\n"
            f"node {output(['node', '--version'])}, BullMQ {bullmq}; minitask at {args.repo} "
            f"({commit}), Python {python}\n"
            f"{args.tasks:,} jobs per drain ({', '.join(args.task)}), {args.rounds} rounds, "
            f"prefetch 1; load average at start {os.getloadavg()}")


def medians(runs: List[Dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"{'task':5} {'contender':44} {'tasks/s (range)':>22} {'Redis us/task':>14} "
             f"{'worker us/task':>15}"]
    for task in args.task:
        for contender in args.only:
            mine = [r for r in runs if r["task"] == task and r["contender"] == contender.key]
            if not mine:
                continue
            rates = [r["rate"] for r in mine]
            lines.append(
                f"{task:5} {contender.label:44} "
                f"{statistics.median(rates):6,.0f} {f'({min(rates):,.0f}-{max(rates):,.0f})':>15} "
                f"{statistics.median(r['redis_us'] for r in mine):14.1f} "
                f"{statistics.median(r['worker_us'] for r in mine):15.0f}")
    loads = [r["load"] for r in runs]
    lines.append(f"load average (1 min) during the runs: {min(loads):.1f} to {max(loads):.1f}, "
                 f"median {statistics.median(loads):.1f}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse(argv)
    if not args.no_install:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel", "error"],
                       cwd=HERE, check=True, timeout=600)
    said = header(args)
    print(said, flush=True)
    driver = Driver(args)
    runs: List[Dict[str, Any]] = []
    for index in range(args.rounds):
        turn = index % len(args.only)
        order = args.only[turn:] + args.only[:turn]
        server = ThrowawayServer(prefix="minitask-versus-")
        try:
            for task in args.task:
                for contender in order:
                    result = driver.run(server, contender, task)
                    runs.append({**result, "round": index + 1})
                    extra = (f" (/proc {result['worker_proc_us']:.0f})"
                             if "worker_proc_us" in result else "")
                    print(f"round {index + 1} {task:4} {contender.label:44} "
                          f"{result['rate']:7,.0f} tasks/s  Redis {result['redis_us']:6.1f} "
                          f"us/task  worker {result['worker_us']:4.0f} us/task{extra}  "
                          f"load {result['load']:.1f}", flush=True)
        finally:
            server.stop()
    print("\nmedians:\n" + medians(runs, args))
    if args.json:
        args.json.write_text(json.dumps({"header": said, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
