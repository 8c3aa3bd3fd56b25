"""The performance regression guard: Redis instructions per operation, counted by
callgrind, against the counts recorded in ``tests/perf/instructions.json``.

``python -m tests.perf.guard`` (``make perf-guard``) fails when any operation costs
Redis more than 5 % over its recorded count; ``--record`` (``make perf-record``)
writes the file anew (``--record NAME...``: those operations' counts only). An
instruction count does not depend on the machine's load, so the guard is exact on a
shared machine.

How it counts: a throwaway redis-server runs under ``valgrind --tool=callgrind``
with collection on only inside ``processCommand`` (a command's execution: not the
event loop, the network or the timers, whose share depends on time), and a dump of
the counts at each ``LASTSAVE`` (``--dump-before=lastsaveCommand``). The guard sends
a ``LASTSAVE`` before and after each operation's counted calls, so each dump holds
one operation's instructions, with the markers' own (measured by an empty pair and
taken off). Lua's garbage collection is counted work too, so each operation runs on
a new Lua VM (SCRIPT FLUSH) and its counted calls start with the collector at the
same place (``CountingServer.settle``): where it stood used to depend on every
script call before, and moved an operation's count by up to 4 % from run to run of
unchanged scripts (the rest, Redis's random hash seed and skiplist levels and the
tasks' random ids, moves none by more than half a percent). Redis exports those
function names (it is linked with ``-rdynamic`` for its crash reports), so Debian's
stripped redis-server will do.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import redis

if TYPE_CHECKING:  # the app, imported only when measuring
    from . import operations as ops

RECORD = Path(__file__).with_name("instructions.json")
#: A count more than this many percent over its recorded one fails the guard.
TOLERANCE_PERCENT = 5
TOLERANCE = TOLERANCE_PERCENT / 100
#: The functions the counting hangs on; a redis-server whose symbols lack them cannot
#: be measured this way.
SYMBOLS = (b"processCommand", b"lastsaveCommand")
#: Redis runs a step of Lua's garbage collector after every this many script calls
#: (LUA_GC_CYCLE_PERIOD, counting from the server's start).
LUA_GC_PERIOD = 50
HOW_TO_GET = ("on Debian or Ubuntu: apt-get install valgrind redis-server "
              "(.ci/run installs them when missing)")


class GuardError(Exception):
    """The guard cannot measure: a tool is missing or the server misbehaved."""


@dataclass(frozen=True)
class Verdict:
    """One operation's count beside its recorded one."""

    name: str
    recorded: Optional[int]
    measured: Optional[int]

    @property
    def change(self) -> Optional[float]:
        if self.recorded is None or self.measured is None or not self.recorded:
            return None
        return self.measured / self.recorded - 1

    @property
    def over(self) -> bool:
        """More than the tolerance over the record (whole numbers: no rounding)."""
        return (self.recorded is not None and self.measured is not None
                and self.measured * 100 > self.recorded * (100 + TOLERANCE_PERCENT))

    @property
    def failed(self) -> bool:
        return self.recorded is None or self.measured is None or self.over

    @property
    def says(self) -> str:
        if self.recorded is None:
            return "FAIL: not recorded (make perf-record)"
        if self.measured is None:
            return "FAIL: recorded, no longer measured (make perf-record)"
        if self.over:
            return f"FAIL: over {TOLERANCE:.0%}"
        change = self.change
        return ("ok (cheaper: make perf-record to keep the gain)"
                if change is not None and change < -TOLERANCE else "ok")


def compare(recorded: Dict[str, int], measured: Dict[str, int]) -> List[Verdict]:
    """Each operation's verdict, measured ones first in their order."""
    names = list(measured) + [name for name in recorded if name not in measured]
    return [Verdict(name, recorded.get(name), measured.get(name)) for name in names]


def table(verdicts: Sequence[Verdict], what: Dict[str, str]) -> str:
    """The verdicts as a plain-text table."""
    rows = [("operation", "recorded", "now", "change", "verdict")]
    for v in verdicts:
        change = v.change
        rows.append((v.name, "-" if v.recorded is None else f"{v.recorded:,}",
                     "-" if v.measured is None else f"{v.measured:,}",
                     "-" if change is None else f"{change:+.1%}", v.says))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) if i in (0, 4) else cell.rjust(width)
                       for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("")
    lines += [f"{name}: {text}" for name, text in what.items()]
    return "\n".join(lines)


def server_binary() -> str:
    """The redis-server to measure (``MINITASK_PERF_REDIS``, else the one on PATH),
    checked for valgrind and the symbols the counting needs."""
    if shutil.which("valgrind") is None:
        raise GuardError(f"valgrind is not installed: {HOW_TO_GET}")
    binary = os.environ.get("MINITASK_PERF_REDIS") or shutil.which("redis-server")
    if binary is None:
        raise GuardError(f"no redis-server on PATH: {HOW_TO_GET}")
    data = Path(binary).read_bytes()
    missing = [name.decode() for name in SYMBOLS if name + b"\0" not in data]
    if missing:
        raise GuardError(f"{binary} names no {', '.join(missing)} among its symbols: the "
                         f"guard needs a redis-server built with them (Debian's is: "
                         f"{HOW_TO_GET}; or set MINITASK_PERF_REDIS to such a binary)")
    return binary


@dataclass(frozen=True)
class Measured:
    """One run's counts per task, by operation, and the server they were counted on."""

    redis_version: str
    counts: Dict[str, int]
    what: Dict[str, str]


def read_record(path: Path = RECORD) -> Measured:
    """The recorded counts."""
    data = json.loads(path.read_text())
    return Measured(data["redis_version"], dict(data["counts"]), dict(data["what"]))


def write_record(found: Measured, path: Path = RECORD) -> None:
    path.write_text(json.dumps({
        "about": "Redis instructions per task of each operation, counted by callgrind: "
                 "make perf-guard checks them, make perf-record rewrites this file "
                 "(tests/perf/guard.py)",
        "redis_version": found.redis_version, "tolerance": TOLERANCE,
        "counts": found.counts, "what": found.what}, indent=2) + "\n")


def check(recorded: Measured, found: Measured) -> Tuple[bool, str]:
    """Whether ``found`` passes against ``recorded``, and the table that says so."""
    verdicts = compare(recorded.counts, found.counts)
    what = {**recorded.what, **found.what}
    text = table(verdicts, {v.name: what[v.name] for v in verdicts if v.name in what})
    if recorded.redis_version != found.redis_version:
        return False, (f"{text}\n\nFAIL: the counts were recorded on Redis "
                       f"{recorded.redis_version}, this is {found.redis_version}: counts "
                       f"of two versions do not compare (make perf-record on this one, "
                       f"in the commit that changes it)")
    failed = [v.name for v in verdicts if v.failed]
    if failed:
        return False, (f"{text}\n\nFAIL: {', '.join(failed)}: over the recorded Redis "
                       f"instructions by more than {TOLERANCE:.0%}. If the cost is meant, "
                       f"run make perf-record and commit tests/perf/instructions.json with "
                       f"the change, saying why.")
    return True, f"{text}\n\nperf-guard: every count within {TOLERANCE:.0%} of the record"


class CountingServer:
    """A redis-server under callgrind that dumps its command instructions at each
    LASTSAVE; ``segment()`` runs a step and returns the instructions it cost."""

    def __init__(self, binary: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="minitask-perf-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.out = os.path.join(self.directory, "callgrind.out")
        self.log = open(os.path.join(self.directory, "valgrind.log"), "wb")
        self.process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--toggle-collect=processCommand",
             "--dump-before=lastsaveCommand", f"--callgrind-out-file={self.out}",
             binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory,
             # work that would otherwise fall to the timers (uncounted) or be done only
             # when a call was slow, as valgrind makes every call: both depend on time
             "--activerehashing", "no", "--slowlog-log-slower-than", "-1",
             "--latency-tracking", "no"],
            stdout=self.log, stderr=subprocess.STDOUT)
        # a generous read timeout: under valgrind on a loaded machine, one call of a
        # preparation (a fetch of a thousand) can outlast the app's 15 s
        self.url = f"redis://127.0.0.1:{self.port}/0?socket_timeout=600"
        self.client = redis.Redis(port=self.port)
        self.dumps = 0
        self._wait_ready()
        self.version = str(self.client.info("server")["redis_version"])
        self.overhead = 0
        self.overhead = self.segment(lambda: None)

    def _wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise GuardError(f"redis-server under valgrind exited: {self._log_tail()}")
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise GuardError(f"redis-server under valgrind did not answer within "
                                     f"{timeout:.0f} s: {self._log_tail()}") from None
                time.sleep(0.2)

    def _log_tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-2000:]

    def _mark(self) -> int:
        """Dump the counts so far; returns the dump's instructions."""
        self.client.lastsave()
        self.dumps += 1
        path = Path(f"{self.out}.{self.dumps}")
        found = re.search(r"^totals: (\d+)", path.read_text(), re.MULTILINE) if path.exists() \
            else None
        if found is None:
            raise GuardError(f"callgrind wrote no counts to {path}: {self._log_tail()}")
        path.unlink()
        return int(found.group(1))

    def segment(self, step: Callable[[], None]) -> int:
        """The instructions Redis spent executing the commands ``step`` sent, less the
        markers' own."""
        self._mark()
        step()
        return self._mark() - self.overhead

    def flush(self) -> None:
        """Empty the data and Lua: a new Lua VM each operation (SCRIPT FLUSH), so that
        its heap, and where its garbage collector stands, owe nothing to the
        operations measured before (they moved a count by up to 4 %)."""
        self.client.flushall()
        self.client.script_flush()

    def settle(self) -> None:
        """Put Lua's garbage collection at the same place before each counted segment:
        the collector's cycle just ended (a full collection), and Redis's own step of
        it, after every ``LUA_GC_PERIOD``-th script call, as many calls away. Both are
        counted work, and where a segment met them depended on every call before."""
        stats = self.client.info("commandstats")
        runs = sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
                   for name in ("eval", "evalsha", "eval_ro", "evalsha_ro"))
        # an EVALSHA refused NOSCRIPT ran no script
        runs -= int(self.client.info("errorstats").get("errorstat_NOSCRIPT", {})
                    .get("count", 0))
        pipe = self.client.pipeline(transaction=False)
        for _ in range(-runs % LUA_GC_PERIOD):
            pipe.eval("return 0", 0)
        pipe.eval("collectgarbage('collect') return 0", 0)  # the first of a period
        pipe.execute()

    def stop(self) -> None:
        try:
            self.client.shutdown(nosave=True)
        except redis.RedisError:
            pass  # it closes the connection as it goes
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def measure_one(server: CountingServer, driver: ops.Driver, operation: ops.Operation) -> int:
    """One operation's Redis instructions per task, rounded: on emptied data and a new
    Lua VM, prepared, warmed up, Lua's garbage collection settled, then counted."""
    from . import operations as ops
    server.flush()
    operation.prepare(driver, ops.WARM_UP + ops.CALLS)
    operation.call(driver, ops.WARM_UP)
    server.settle()
    spent = server.segment(lambda: operation.call(driver, ops.CALLS))
    return round(spent / (ops.CALLS * operation.per_call))


def measure(names: Optional[Sequence[str]] = None,
            progress: Callable[[str], None] = lambda line: None) -> "Measured":
    """Count every operation (or those named) on a fresh server: per task, rounded."""
    from . import operations as ops  # the app's tasks and broker, only when measuring
    binary = server_binary()
    server = CountingServer(binary)
    driver = None
    counts: Dict[str, int] = {}
    what: Dict[str, str] = {}
    try:
        driver = ops.Driver(server.url)
        for operation in ops.operations():
            if names and operation.name not in names:
                continue
            progress(f"measuring {operation.name}")
            counts[operation.name] = measure_one(server, driver, operation)
            what[operation.name] = operation.what
    finally:
        if driver is not None:
            driver.app.close()
        server.stop()
    return Measured(server.version, counts, what)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.guard", description=__doc__)
    parser.add_argument("--record", action="store_true",
                        help=f"write the counts measured to {RECORD.name}")
    parser.add_argument("names", nargs="*", help="only these operations")
    args = parser.parse_args(argv)
    try:
        found = measure(args.names, lambda line: print(line, file=sys.stderr, flush=True))
    except GuardError as exc:
        print(f"perf-guard: cannot measure: {exc}", file=sys.stderr)
        return 2
    if args.record:
        if args.names:  # those operations' counts only: the others stay as recorded
            kept = read_record()
            if kept.redis_version != found.redis_version:
                print(f"perf-record: the record's counts are of Redis {kept.redis_version}, "
                      f"this is {found.redis_version}: record them all", file=sys.stderr)
                return 2
            found = Measured(found.redis_version, {**kept.counts, **found.counts},
                             {**kept.what, **found.what})
        write_record(found)
        print(table(compare(found.counts, found.counts), found.what))
        print(f"\nperf-record: wrote {RECORD} (Redis {found.redis_version})")
        return 0
    recorded = read_record()
    if args.names:
        recorded = Measured(recorded.redis_version,
                            {k: v for k, v in recorded.counts.items() if k in args.names},
                            recorded.what)
    passed, text = check(recorded, found)
    print(text)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
