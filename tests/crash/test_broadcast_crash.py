"""Broadcast calls with real worker processes on a real redis-server (guide/broadcast).

Each worker runs ``tests.apps.broadcast`` as the subscriber its ``--name`` says;
its tasks leave markers ``marks:<kind>:<subscriber>`` (``n:pid:attempt:delivery``)
and the tests assert on those and on Redis, never on logs.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from minitask import BroadcastHandle, ResultTimeout
from minitask.broker.keys import QueueKeys, lane
from tests.apps.broadcast import QUEUE, producer
from tests.support.processes import Processes, kill_group, send
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 120.0
APP = "tests.apps.broadcast"


class Fleet:
    """The workers of one test, by subscriber name, and the producer side."""

    def __init__(self, server: RedisServer, processes: Processes, logs: Path) -> None:
        self.server = server
        self.processes = processes
        self.logs = logs
        self.client = server.client()
        self.app, self.note, self.hold = producer(server.client())
        self.workers: List[Tuple[str, "subprocess.Popen[bytes]"]] = []

    def start(self, name: str, pool: str = "thread", concurrency: int = 1,
              **env: str) -> "subprocess.Popen[bytes]":
        log = self.logs / f"worker-{len(self.workers)}-{name}.log"
        process = self.processes.worker(
            APP, "--name", name, "--pool", pool, "-c", str(concurrency), "-Q", QUEUE,
            env={"MINITASK_BROKER_URL": self.server.url, "TEST_SUBSCRIBER": name,
                 "TEST_VISIBILITY": "2", **env}, log=log)
        self.workers.append((name, process))
        return process

    def subscribed(self, *names: str) -> None:
        wait_until(lambda: set(names) <= {s.name for s in self.app.subscribers(QUEUE)},
                   timeout=DEADLINE, message=f"subscribers {names}")

    def live(self, count: int) -> None:
        """Wait until ``count`` workers have registered (each then serves at once)."""
        wait_until(lambda: len(self.app.broker.registry.live(self.app.clock.now_ms(), 60_000))
                   >= count, timeout=DEADLINE, message=f"{count} live workers")

    def marks(self, kind: str, name: str) -> List[Tuple[int, int, int, int]]:
        entries = self.client.lrange(f"marks:{kind}:{name}", 0, -1)
        return [tuple(int(part) for part in raw.decode().split(":"))  # type: ignore[misc]
                for raw in entries]

    def print_logs(self) -> None:
        for path in sorted(self.logs.glob("worker-*.log")):
            lines = path.read_text(errors="replace").splitlines()
            print(f"----- {path.name} (last 40 of {len(lines)} lines)")
            print("\n".join(lines[-40:]))

    def close(self) -> None:
        self.client.close()
        self.app.close()


@pytest.fixture
def fleet(start_redis: Callable[..., RedisServer], processes: Processes, tmp_path: Path,
          request: pytest.FixtureRequest) -> Any:
    made = Fleet(start_redis(), processes, tmp_path)
    try:
        yield made
    finally:
        if did_fail(request):
            made.print_logs()
        made.close()


def _numbers(marks: List[Tuple[int, int, int, int]]) -> List[int]:
    return [mark[0] for mark in marks]


def test_each_subscriber_runs_each_call_once_in_order(fleet: Fleet) -> None:
    """500 calls, subscribers a, b (two workers) and c: each call runs once per name,
    b's two workers share them, and every worker starts its runs in send order."""
    fleet.start("a")
    fleet.start("b")
    fleet.start("b")
    fleet.start("c")
    fleet.subscribed("a", "b", "c")
    fleet.live(4)  # both of b's workers are up: each gets a share
    handles = [fleet.note.delay(n) for n in range(500)]
    assert isinstance(handles[-1], BroadcastHandle)
    assert sorted(handles[-1].subscribers()) == ["a", "b", "c"]
    for name in ("a", "b", "c"):
        wait_until(lambda: len(fleet.marks("note", name)) >= 500, timeout=DEADLINE,
                   message=f"500 runs on {name}")
    for name in ("a", "c"):
        assert _numbers(fleet.marks("note", name)) == list(range(500))  # FIFO, once each
    b_runs = fleet.marks("note", "b")
    assert sorted(_numbers(b_runs)) == list(range(500))  # once each between the two
    by_pid: Dict[int, List[int]] = {}
    for n, pid, _, _ in b_runs:
        by_pid.setdefault(pid, []).append(n)
    assert len(by_pid) == 2, "b's two workers should both have run calls"
    for runs in by_pid.values():
        assert runs == sorted(runs)  # each of b's workers starts them in send order
    assert handles[-1].join(timeout=DEADLINE) == {"a": 499, "b": 499, "c": 499}
    # every subscriber pulled every call: nothing is left in the log
    wait_until(lambda: fleet.app.broker.broadcasts.log_size(QUEUE) == 0, timeout=DEADLINE,
               message="an empty broadcast log")
    assert fleet.client.hlen(QueueKeys("bcast", QUEUE).broadcast("bodies")) == 0
    # once every run is over, still exactly once each: no late second run
    assert [len(fleet.marks("note", name)) for name in ("a", "b", "c")] == [500] * 3


def test_a_stopped_subscriber_runs_what_it_missed_in_order(fleet: Fleet) -> None:
    """c is stopped, 100 calls are sent; join() waits for c, and c, restarted, runs
    the 100 in order."""
    fleet.start("a")
    c = fleet.start("c")
    fleet.subscribed("a", "c")
    # a worker subscribes before it installs its signal handlers, and heartbeats after:
    # a SIGTERM before that killed c (exit -15) instead of stopping it
    fleet.live(2)
    send(c, signal.SIGTERM, group=True)
    assert c.wait(timeout=DEADLINE) == 0
    handles = [fleet.note.delay(n) for n in range(100)]
    wait_until(lambda: len(fleet.marks("note", "a")) >= 100, timeout=DEADLINE,
               message="100 runs on a")
    with pytest.raises(ResultTimeout) as raised:
        handles[-1].join(timeout=0.5)
    assert "c (last seen" in str(raised.value) and "100 call(s) behind" in str(raised.value)
    assert "a (" not in str(raised.value)
    lag = {s.name: s.lag for s in fleet.app.subscribers(QUEUE)}
    assert lag == {"a": 0, "c": 100}
    fleet.start("c")
    assert handles[-1].join(timeout=DEADLINE) == {"a": 99, "c": 99}
    assert _numbers(fleet.marks("note", "c")) == list(range(100))
    assert fleet.app.broker.broadcasts.log_size(QUEUE) == 0


def test_a_sigkilled_subscribers_run_is_delivered_again(fleet: Fleet) -> None:
    """SIGKILL a's worker while it runs a call: a new worker of name a runs it again
    (delivery 2) and the calls after it; b is not affected; none is lost."""
    fleet.start("a", TEST_HOLD="600")  # still running when killed, however slow the VM
    fleet.start("b", TEST_HOLD="0")
    fleet.subscribed("a", "b")
    handles = [fleet.hold.delay(n) for n in range(5)]
    wait_until(lambda: fleet.marks("started", "a"), timeout=DEADLINE, message="a's first run")
    victim = fleet.workers[0][1]
    kill_group(victim)
    assert victim.wait(timeout=DEADLINE) == -signal.SIGKILL
    assert fleet.marks("ended", "a") == []
    fleet.start("a", TEST_HOLD="0")
    for handle in handles:
        assert handle.join(timeout=DEADLINE) == {"a": "a", "b": "b"}
    started = fleet.marks("started", "a")
    ended = fleet.marks("ended", "a")
    assert sorted(_numbers(ended)) == list(range(5))  # none lost, each finished once
    first = [mark for mark in started if mark[0] == 0]
    assert [mark[3] for mark in first] == [1, 2]  # delivered again after the kill
    assert len({mark[1] for mark in first}) == 2  # by another process
    assert sorted(_numbers(fleet.marks("ended", "b"))) == list(range(5))
    lane_keys = QueueKeys("bcast", lane(QUEUE, "a"))
    assert fleet.client.zcard(lane_keys.leases) == 0
    assert fleet.client.hlen(lane_keys.messages) == 0


def test_a_sigkilled_run_goes_to_a_live_worker_of_the_same_name(fleet: Fleet) -> None:
    """b has two workers: SIGKILL the one running call 0 while the other is up and
    idle; the live one runs call 0 again (delivery 2), without any restart."""
    victim = fleet.start("b", TEST_HOLD="600")
    fleet.subscribed("b")
    handles = [fleet.hold.delay(n) for n in range(4)]
    wait_until(lambda: fleet.marks("started", "b"), timeout=DEADLINE, message="b's first run")
    survivor = fleet.start("b", TEST_HOLD="0")
    # the survivor runs the calls the victim has not leased: it is up and pulling
    wait_until(lambda: sorted(_numbers(fleet.marks("ended", "b"))) == [1, 2, 3],
               timeout=DEADLINE, message="calls 1-3 run by the second worker of b")
    kill_group(victim)
    assert victim.wait(timeout=DEADLINE) == -signal.SIGKILL
    assert [h.join(timeout=DEADLINE) for h in handles] == [{"b": "b"}] * 4
    first = [mark for mark in fleet.marks("started", "b") if mark[0] == 0]
    assert [(mark[1], mark[3]) for mark in first] == [(victim.pid, 1), (survivor.pid, 2)]
    assert sorted(_numbers(fleet.marks("ended", "b"))) == [0, 1, 2, 3]
    assert survivor.poll() is None


def test_an_idle_subscriber_blocks_instead_of_polling_and_wakes_for_a_send(
        fleet: Fleet) -> None:
    """An idle worker serving a broadcast queue sends few scripts and blocking reads
    (its waits last up to 5 s, each with the pull behind it) and wakes for a send."""
    fleet.start("a", TEST_VISIBILITY="30")  # heartbeats every 10 s, as a user's would
    fleet.subscribed("a")
    # idle: the fetching thread's BLPOP, the cancel watch's XREAD, the orders listener
    wait_until(lambda: int(fleet.client.info("clients")["blocked_clients"]) >= 3,
               timeout=DEADLINE, message="three blocked clients")

    def calls() -> Dict[str, int]:
        # Redis counts the commands scripts run here too: count only what a client
        # sends (scripts, blocking reads, CLIENT), a round trip each or so
        stats = fleet.client.info("commandstats")
        return {name: int(value["calls"]) for name, value in stats.items()
                if name.startswith(("cmdstat_eval", "cmdstat_blpop", "cmdstat_xread",
                                    "cmdstat_client"))}

    before = calls()
    started = time.monotonic()
    time.sleep(6.0)  # the measurement window (over a 5 s wait), not a synchronisation
    after = calls()
    elapsed = time.monotonic() - started
    made = {name: after[name] - before.get(name, 0) for name in after
            if after[name] != before.get(name, 0)}
    print(f"\nidle subscriber: {sum(made.values()) / elapsed:.2f} calls/s {made}")
    assert sum(made.values()) / elapsed <= 5.0, made
    assert fleet.note.delay(1).join(timeout=DEADLINE) == {"a": 1}


def test_a_process_pool_subscriber_runs_each_call_once_in_its_children(fleet: Fleet) -> None:
    """Lane jobs go through the process pool like any job: a (two children) and b
    (threads) each run each of 20 calls once."""
    supervisor = fleet.start("a", pool="process", concurrency=2)
    fleet.start("b")
    fleet.subscribed("a", "b")
    handles = [fleet.note.delay(n) for n in range(20)]
    assert [h.join(timeout=DEADLINE) for h in handles] == [{"a": n, "b": n} for n in range(20)]
    runs = fleet.marks("note", "a")
    assert sorted(_numbers(runs)) == list(range(20))
    assert supervisor.pid not in {mark[1] for mark in runs}  # run by its children
    assert sorted(_numbers(fleet.marks("note", "b"))) == list(range(20))


@pytest.mark.parametrize("planted", ["abc", "1.5"])
def test_a_damaged_cursor_restarts_its_subscriber_from_the_oldest_call_logged(
        fleet: Fleet, planted: str) -> None:
    """a is stopped after call 0; b runs calls 1-3, a's cursor is damaged meanwhile.
    The calls a did not pull stay logged (its cursor counts as 0 when b's pulls and
    the sends drop what was pulled), and a, started again, restarts from the oldest
    call logged: it runs 1, 2 and 3, none lost, and not 0 again (dropped once both
    had pulled it)."""
    a = fleet.start("a")
    fleet.start("b")
    fleet.subscribed("a", "b")
    fleet.live(2)  # a's signal handlers are up: SIGTERM stops it
    assert fleet.note.delay(0).join(timeout=DEADLINE) == {"a": 0, "b": 0}
    send(a, signal.SIGTERM, group=True)
    assert a.wait(timeout=DEADLINE) == 0
    handles = [fleet.note.delay(1), fleet.note.delay(2)]
    wait_until(lambda: _numbers(fleet.marks("note", "b")) == [0, 1, 2], timeout=DEADLINE,
               message="calls 1 and 2 run on b")
    cursors = QueueKeys("bcast", QUEUE).broadcast("cursors")
    fleet.client.hset(cursors, "a", planted)
    handles.append(fleet.note.delay(3))  # its send drops what every subscriber pulled
    wait_until(lambda: _numbers(fleet.marks("note", "b")) == [0, 1, 2, 3],
               timeout=DEADLINE, message="call 3 run on b")
    assert fleet.app.broker.broadcasts.log_size(QUEUE) == 3  # 1-3 kept for a
    fleet.start("a")
    assert [h.join(timeout=DEADLINE) for h in handles] == [{"a": n, "b": n} for n in (1, 2, 3)]
    assert _numbers(fleet.marks("note", "a")) == [0, 1, 2, 3]
    wait_until(lambda: fleet.app.broker.broadcasts.log_size(QUEUE) == 0, timeout=DEADLINE,
               message="an empty broadcast log")
    assert fleet.client.hget(cursors, "a") == fleet.client.hget(
        QueueKeys("bcast", QUEUE).broadcast("state"), "seq")  # past all four calls
