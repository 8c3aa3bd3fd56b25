"""Fair queues end to end (guide/fair-queues): the suite's real redis-server, real
worker processes, a worker killed with SIGKILL mid-task.

Tasks of ``tests.apps.fair`` push their starts (and ends) to Redis lists from inside
the task, so the order read back is the order in which they really ran.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from tests.apps import fair
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

DEADLINE = 120.0
APP = "tests.apps.fair"


class Fair:
    """The test's side: the app's tasks on the suite's server, and its workers."""

    def __init__(self, server: RedisServer, processes: Processes, logs: Path,
                 client: "redis.Redis[bytes]") -> None:
        self.server, self.processes, self.logs, self.client = server, processes, logs, client
        self.app = Minitask("fair", broker=server.client())
        for task in fair.app.tasks.values():
            options = task.options
            grouping = options.grouping
            self.app.task(name=task.name, group_by=grouping.group_by,
                          group_max_running=grouping.max_running or None,
                          retries=options.retries, retry_backoff=options.retry_backoff,
                          retry_backoff_max=options.retry_backoff_max)(task.func)
        self.started = 0

    def worker(self, *args: str) -> "object":
        env = {"MINITASK_BROKER_URL": self.server.url, "TEST_VISIBILITY": "3"}
        log = self.logs / f"worker-{self.started}.log"
        self.started += 1
        process = self.processes.worker(APP, "--pool", "thread", "--loglevel", "WARNING",
                                        *args, env=env, log=log)
        return process

    def wait_workers(self) -> None:
        wait_until(lambda: self.client.zcard(AppKeys("fair").workers) >= self.started,
                   timeout=DEADLINE, message=f"{self.started} workers to start")

    def print_logs(self) -> None:
        for index in range(self.started):
            path = self.logs / f"worker-{index}.log"
            print(f"----- {path}\n{path.read_text(errors='replace')[-4000:]}")


@pytest.fixture
def fq(redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
       tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fair]:
    setup = Fair(redis_server, processes, tmp_path, admin)
    try:
        yield setup
    finally:
        if did_fail(request):
            setup.print_logs()
        processes.kill_all()
        setup.app.close()


def test_small_tenants_start_before_the_200th_task_of_a_big_backlog(fq: Fair) -> None:
    job = fq.app.tasks["tests.apps.fair.tenant_job"]
    big = 5000
    job.delay_many([("A", n) for n in range(big)])
    for tenant in "BCD":
        job.delay_many([(tenant, n) for n in range(10)])
    fq.worker("-c", "4")

    def small_done() -> bool:
        starts = [raw.decode() for raw in fq.client.lrange("fair:starts", 0, -1)]
        return sum(1 for s in starts if not s.startswith("A:")) == 30

    wait_until(small_done, timeout=DEADLINE, message="every task of B, C and D to start")
    starts = [raw.decode() for raw in fq.client.lrange("fair:starts", 0, -1)]
    a_starts = [i for i, s in enumerate(starts) if s.startswith("A:")]
    last_small = max(i for i, s in enumerate(starts) if not s.startswith("A:"))
    print(f"the last of B, C, D started as task {last_small + 1}, after "
          f"{sum(1 for i in a_starts if i < last_small)} of A's {big}")
    assert len(a_starts) < 200 or last_small < a_starts[199]


def _check_group_log(group: str, records: List[str], count: int, failing: set,
                     killed: int) -> int:
    """Starts and ends alternate (no overlap); numbers never go back (no reordering);
    each task ends ok; what the killed worker ran is delivered again, at its place:
    a start with no end (killed mid-task), or an end it had no time to acknowledge,
    is followed by the same task's next delivery. Returns how many such runs."""
    previous_start = None
    previous_pid = ""
    expected_next = 0
    oks: List[int] = []
    cut = 0
    for record in records:
        kind, number, attempt, status, pid = record.split(":")
        n = int(number)
        if kind == "start":
            if previous_start is not None:
                # a start with no end before it: the killed worker's, delivered again
                assert previous_pid == str(killed) and previous_start == n, (group, records)
                cut += 1
            elif oks and oks[-1] == n and expected_next == n + 1:
                # ended on the killed worker before its outcome was recorded: again
                assert previous_pid == str(killed), (group, records)
                expected_next = n
                oks.pop()
                cut += 1
            assert n == expected_next, (group, records)
            previous_start, previous_pid = n, pid
        else:
            assert previous_start == n and pid == previous_pid, (group, records)
            previous_start = None
            if status == "ok":
                oks.append(n)
                expected_next = n + 1
            else:
                assert f"{group}:{n}" in failing and attempt == "1", (group, records)
    assert oks == list(range(count)), (group, records)
    return cut


def _dump(client: "redis.Redis[bytes]", groups: List[str]) -> None:
    """What Redis holds of the queue and its groups: printed when a test fails."""
    base = "minitask:{fair:default}:"
    for group in groups:
        print(group, client.lrange(f"fair:log:{group}", -4, -1),
              client.zrange(f"{base}flow:g:{group}:ready", 0, -1, withscores=True),
              client.hgetall(f"{base}flow:g:{group}:turn"),
              client.smembers(f"{base}flow:g:{group}:running"))
    for key in ("leases", "delayed", "flow_due", "cancelled"):
        print(key, client.zrange(base + key, 0, -1, withscores=True))
    for priority in range(10):
        print(priority, client.lrange(f"{base}ready:{priority}", 0, -1))
    print("wake", client.llen(base + "wake"), "flow", client.hlen(base + "flow"))


def test_groups_run_in_strict_order_across_retries_and_a_killed_worker(fq: Fair) -> None:
    ordered = fq.app.tasks["tests.apps.fair.ordered"]
    groups, per_group = [f"g{i}" for i in range(10)], 20
    failing = {f"g{i}:{(3 * i) % per_group}" for i in range(0, 10, 2)}
    hung = "g3:5"
    fq.client.sadd("fair:fail", *failing)
    fq.client.set("fair:hang", hung)
    workers = [fq.worker("-c", "2") for _ in range(3)]
    fq.wait_workers()
    for n in range(per_group):  # interleaved sends: the groups grow together
        ordered.delay_many([(group, n) for group in groups])
    pid = int(wait_until(lambda: fq.client.get("fair:hung"), timeout=DEADLINE,
                         message=f"{hung} to start"))
    killed = next(w for w in workers if getattr(w, "pid") == pid)
    os.killpg(pid, signal.SIGKILL)
    getattr(killed, "wait")(timeout=30)
    fq.worker("-c", "2")  # three workers again

    def done() -> Dict[str, List[str]]:
        logs = {g: [r.decode() for r in fq.client.lrange(f"fair:log:{g}", 0, -1)]
                for g in groups}
        finished = all(len({r.split(":")[1] for r in records if ":ok:" in r}) == per_group
                       for records in logs.values())
        return logs if finished else {}

    try:
        logs = wait_until(done, timeout=DEADLINE / 2, message="every group to finish")
    except AssertionError:
        _dump(fq.client, groups)
        raise
    cut = sum(_check_group_log(group, logs[group], per_group, failing, pid)
              for group in groups)
    # the hung task, and at most a few more the killed worker held (-c 2, prefetch)
    assert sum(1 for r in logs["g3"] if r.startswith("start:5:")) == 2
    assert cut >= 1
    # nothing of any group is left in Redis once all have ended
    wait_until(lambda: not fq.client.keys("minitask:{fair:default}:flow:g:*"),
               timeout=DEADLINE, message="the groups' keys to go")


def test_minitask_status_shows_groups_and_their_largest_backlogs(
        fq: Fair, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from minitask.cli.main import main

    job = fq.app.tasks["tests.apps.fair.tenant_job"]
    job.delay_many([("big", n) for n in range(30)])
    job.delay_many([("small", n) for n in range(2)])
    monkeypatch.setenv("MINITASK_BROKER_URL", fq.server.url)
    assert main(["status", "-A", "tests.apps.fair"]) == 0
    out = capsys.readouterr().out
    assert "32 ready in 2 group(s); largest: big=30, small=2" in out
    assert main(["status", "-A", "tests.apps.fair", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)["queues"]["default"]
    assert (default["ready"], default["groups"], default["largest_groups"]) == \
        (32, 2, [["big", 30], ["small", 2]])
