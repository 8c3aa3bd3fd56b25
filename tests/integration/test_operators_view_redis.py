"""The operators' view with real worker processes on the suite's redis-server: the
record of recent outcomes shows exactly its cap under 10,000 real outcomes (Redis
holds at most a stream node more) and nothing
when it is off; running tasks of several workers are listed, one script call per
queue; ``cancel --running`` stops a running task on each pool; ``shutdown`` finds
workers by their --name; hide_args keeps a secret out of logs and CLI output."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple

import pytest

import tests.apps.ops as ops
from minitask import Minitask
from minitask.admin import activity, live_workers
from minitask.broker.keys import queue_keys
from minitask.cli import main
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.ops"
RECENT = queue_keys("ops", "default").recent
#: Generous for a loaded 2-core machine: nothing asserts on speed.
DEADLINE = 120.0


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, ops.app) as served:
        yield served


def until(what: str, check: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    """Poll ``check`` until it returns something true; fail naming ``what``."""
    end = time.monotonic() + deadline
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline} s")
        time.sleep(0.05)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def started(key: str) -> int:
    return int(ops.app.broker.client.llen(f"marks:started:{key}"))


def test_ten_thousand_real_outcomes_show_exactly_the_cap(
        url: str, processes: Processes) -> None:
    ops.add.delay_many([(i, i) for i in range(10_000)])
    env = {"MINITASK_BROKER_URL": url, "TEST_RECENT": "2000"}
    workers = [processes.worker(APP, "--pool", pool, "-c", "2", "--prefetch", "100",
                                "--burst", env=env) for pool in ("process", "thread")]
    for worker in workers:
        assert exit_code(worker, timeout=600) == 0
    counts = ops.app.broker.queues.counts("default")
    assert (counts["ready"], counts["running"], counts["dead"]) == (0, 0, 0)
    client = ops.app.broker.client
    # trimmed about (MAXLEN ~): one stream node (100 entries by default) more at most
    assert 2000 <= client.xlen(RECENT) <= 2000 + 100
    entries = client.xrange(RECENT)
    assert all(fields == {b"e": fields[b"e"], b"n": b"2000"} for _, fields in entries)
    listing = activity.recent(ops.app, state="succeeded", limit=5000)
    assert listing.total == 2000 and len(listing.tasks) == 2000


def test_nothing_is_written_when_the_record_is_off(url: str, processes: Processes) -> None:
    ops.add.delay(1, 2)
    ops.flaky.delay()
    ops.login.delay("ann", "pw")
    later = ops.add.apply_in(3600, 3, 4)
    producer = Minitask("ops", broker=url, recent_outcomes=0)  # a cancel writes too
    assert producer.handle(later.id).cancel() is True
    producer.close()
    worker = processes.worker(APP, "--pool", "thread", "--burst",
                              env={"MINITASK_BROKER_URL": url, "TEST_RECENT": "0"})
    assert exit_code(worker) == 0
    client = ops.app.broker.client
    until("the retry's second attempt", lambda: client.zcard(
        queue_keys("ops", "default").dead) == 2)
    assert list(client.scan_iter(match="*recent*")) == []


def test_running_tasks_of_three_workers_are_listed_one_script_call_per_queue(
        url: str, processes: Processes, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"MINITASK_BROKER_URL": url}
    for name in ("w1", "w2", "w3"):
        processes.worker(APP, "--pool", "thread", "-c", "70", "--name", name, env=env)
    handles = [ops.hold.delay("hold") for _ in range(200)]
    until("200 tasks running", lambda: started("hold") == 200)
    broker = ops.app.broker
    calls: List[str] = []
    real_run = broker.transport.run

    def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real_run(name, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(broker.transport, "run", counted)
        listing = activity.running(ops.app, limit=1000)
    assert calls.count("peek") == len(set(broker.queues.queue_names()) |
                                      set(ops.app.worker_queues()))
    assert listing.total == 200
    assert sorted(item.task_id for item in listing.tasks) == sorted(h.id for h in handles)
    assert {(item.name, item.args, item.state) for item in listing.tasks} == {
        ("ops.hold", "'hold'", "running")}
    code, out = cli(capsys, "inspect", "-A", APP, "running", "--json", "--limit", "500")
    assert code == 0 and json.loads(out)["total"] == 200
    until("three workers listed", lambda: len(live_workers(ops.app)) == 3)
    code, out = cli(capsys, "status", "-A", APP, "--json")
    workers = json.loads(out)["workers"]
    assert sorted(w["name"] for w in workers) == ["w1", "w2", "w3"]
    code, out = cli(capsys, "status", "-A", APP)
    assert all(f"{w['name']} ({w['id']})" in out for w in workers)
    ops.app.broker.client.rpush("marks:release", *["go"] * 200)
    until("every hold task done", lambda: all(h.status() == "succeeded" for h in handles))
    code, out = cli(capsys, "shutdown", "-A", APP, "w1", "w2", "w3", "--wait", "60")
    assert code == 0, out
    for worker in processes.started:
        assert exit_code(worker) == 0


@pytest.mark.parametrize("pool,task", [("thread", ops.long), ("process", ops.long),
                                       ("asyncio", ops.along)])
def test_cancel_running_stops_a_running_task_on_each_pool(
        url: str, processes: Processes, capsys: pytest.CaptureFixture[str],
        pool: str, task: Any) -> None:
    processes.worker(APP, "--pool", pool, "-c", "2", "--name", f"cancel-{pool}",
                     env={"MINITASK_BROKER_URL": url})
    handle = task.delay(pool)
    until(f"the {pool} pool's task started", lambda: started(pool) == 1)
    code, out = cli(capsys, "cancel", "-A", APP, handle.id)
    assert code == 1 and "add --running" in out  # without --running: refused, as before
    code, out = cli(capsys, "cancel", "-A", APP, "--running", handle.id)
    # (stopped already by the time the command looked again, or about to be)
    assert code == 0 and ("asked its worker to stop it" in out or ": cancelled" in out), out
    until("the task cancelled", lambda: handle.status() == "cancelled", 60)
    entries = activity.recent(ops.app, state="cancelled").tasks
    assert [(e.task_id, e.worker) for e in entries] == [(handle.id, f"cancel-{pool}")]
    named = f"cancel-{pool}"  # listed from its first heartbeat on
    until("the worker listed", lambda: [w for w in live_workers(ops.app) if w["name"] == named])
    code, out = cli(capsys, "shutdown", "-A", APP, named, "--wait", "60")
    assert code == 0, out


def test_hide_args_keeps_a_secret_out_of_logs_inspect_and_dead_show(
        url: str, processes: Processes, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    secret = "hunter2-secret"
    handle = ops.login.delay("ann", secret)
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", "thread", "--burst", "--loglevel", "DEBUG",
                              env={"MINITASK_BROKER_URL": url}, log=log)
    assert exit_code(worker) == 0
    assert "PermissionError" in log.read_text()  # the dead letter was logged
    assert secret not in log.read_text()
    for argv in (("inspect", handle.id), ("inspect", handle.id, "--json"),
                 ("dead", "show", handle.id), ("dead", "show", handle.id, "--json"),
                 ("dead", "list", "--json"), ("inspect", "recent")):
        code, out = cli(capsys, argv[0], "-A", APP, *argv[1:])
        assert code == 0 and secret not in out, argv
    assert "hidden" in cli(capsys, "inspect", "-A", APP, handle.id)[1]
    code, out = cli(capsys, "inspect", "-A", APP, "recent", "--task", "ops.login")
    assert code == 0 and "PermissionError: user ann may not log in" in out


def test_an_id_that_is_a_listing_word_is_inspected_with_id(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ops.add.apply_async((1, 2), task_id="running", delay=90)
    ops.add.apply_async((3, 4), task_id="other", delay=30)
    code, out = cli(capsys, "inspect", "-A", APP, "--id", "running", "--json")
    assert code == 0 and json.loads(out)["status"] == "scheduled"
    code, out = cli(capsys, "inspect", "-A", APP, "running")
    assert code == 0 and "no running tasks" in out
    code, out = cli(capsys, "inspect", "-A", APP, "scheduled")
    lines = out.splitlines()
    assert code == 0 and "other" in lines[1] and "running" in lines[2]
    assert "(in 29" in lines[1] or "(in 30" in lines[1]  # a human time beside the clock's
    assert "(in 1 min 2" in lines[2] or "(in 1 min 3" in lines[2]
    assert "2 shown of 2 scheduled" in out
    code, out = cli(capsys, "inspect", "-A", APP, "--id", "running", "--task", "ops.add")
    assert code == 2 and "filter a list" in out
