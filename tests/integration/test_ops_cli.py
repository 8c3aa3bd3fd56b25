"""The ops commands, each against the suite's own redis-server: tasks, inspect, cancel,
dead, purge, shutdown, embedded, and the JSON forms. Task ids that start with '-' or
'--' are used where a command takes ids."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

import tests.apps.basic as basic
from minitask import Minitask
from minitask.cli import main
from minitask.broker.keys import QueueKeys
from minitask.cli import dead as dead_command
from minitask.stores.dead import DeadLetterStore
from tests.support.draining import drain
from tests.support.paths import ROOT
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.basic"
QUEUE = QueueKeys("basic", "default")
DASHED = ["-Xk3abcdefghijklmnopq", "--Xk3abcdefghijklmnop", "-Aabc"]


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, basic.app) as served:
        yield served


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = cli(capsys, *argv, "--json")
    assert code in (0, 1), err
    return json.loads(out)


def run_all() -> int:
    return drain(basic.app.worker(burst=True))


def unknown_task(url: str, task_id: str) -> None:
    """A dead letter: a task the worker does not know."""
    producer = Minitask("basic", broker=url)
    producer.task(name="jobs.mul")(lambda x, y: None).apply_async((2, 3), task_id=task_id)
    producer.close()


def test_tasks_lists_every_task_with_its_options(url: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    report = cli_json(capsys, "tasks", "-A", APP)
    by_name = {row["name"]: row for row in report["tasks"]}
    assert report["app"] == "basic"
    assert by_name["tests.apps.basic.runaway_retried"]["retries"] == 1
    assert by_name["tests.apps.basic.runaway"]["timeout"] == 1.0
    code, out, _ = cli(capsys, "tasks", "-A", APP)
    assert code == 0 and "tests.apps.basic.add" in out


@pytest.mark.parametrize("task_id", DASHED)
def test_inspect_follows_a_task_by_an_id_that_starts_with_a_dash(
        url: str, capsys: pytest.CaptureFixture[str], task_id: str) -> None:
    basic.add.apply_async((2, 3), task_id=task_id, priority=7)
    queued = cli_json(capsys, "inspect", "-A", APP, task_id)
    assert (queued["task_id"], queued["status"], queued["queue"]) == (
        task_id, "queued", "default")
    assert (queued["name"], queued["args"], queued["priority"]) == (
        "tests.apps.basic.add", [2, 3], 7)

    run_all()
    done = cli_json(capsys, "inspect", "-A", APP, task_id)
    assert (done["status"], done["value"], done["attempt"]) == ("succeeded", 5, 1)
    code, out, _ = cli(capsys, "inspect", "-A", APP, "--", task_id)
    assert code == 0 and "value        5" in out


def test_inspect_shows_a_dead_tasks_error_and_traceback(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    handle = basic.fail.delay("no address")
    run_all()
    dead = cli_json(capsys, "inspect", "-A", APP, handle.id)
    assert (dead["status"], dead["exc_type"], dead["message"]) == (
        "failed", "ValueError", "no address")
    assert dead["reason"] == "failed" and "raise ValueError(message)" in dead["traceback"]
    code, out, _ = cli(capsys, "inspect", "-A", APP, handle.id)
    assert code == 0 and "ValueError: no address" in out and "Traceback" in out


def test_inspect_of_a_running_task_shows_its_deliveries_and_lease(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    handle = basic.add.delay(1, 1)
    worker = basic.app.worker()
    job = worker.fetch()  # leased, as a worker that runs it holds it
    assert job is not None
    running = cli_json(capsys, "inspect", "-A", APP, handle.id)
    assert running["status"] == "running" and running["deliveries"] == 1
    assert running["lease_until"] is not None
    worker.execute(job)


def test_inspect_of_an_unknown_id_exits_1(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "inspect", "-A", APP, "-nope")
    assert code == 1 and "unknown" in out


def test_cancel_withdraws_pending_tasks_and_says_which_it_could_not(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    pending = [basic.add.apply_async((1, 1), task_id=task_id) for task_id in DASHED[:2]]
    finished = basic.add.delay(2, 2)
    scheduled = basic.add.apply_in(3600, 3, 3)
    worker = basic.app.worker(queues=["default"])
    # run only the finished one: it is the last queued, so lease the rest first
    jobs = [worker.fetch() for _ in range(3)]
    for job in jobs:
        assert job is not None
        if job.task_id == finished.id:
            worker.execute(job)
        else:
            worker.give_back(job)

    outcome = cli_json(capsys, "cancel", "-A", APP, *DASHED[:2], scheduled.id, finished.id)
    assert outcome == {DASHED[0]: "cancelled", DASHED[1]: "cancelled",
                       scheduled.id: "cancelled", finished.id: "succeeded"}
    assert all(h.status() == "cancelled" for h in pending)
    code, out, _ = cli(capsys, "cancel", "-A", APP, finished.id)
    assert code == 1 and f"{finished.id}: not cancelled, it is succeeded" in out
    assert run_all() == 0


def test_dead_list_show_requeue_and_purge(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    unknown_task(url, "-dead-1")
    failed = basic.fail.delay("bad address")
    unknown_task(url, "--dead-2")
    run_all()

    listed = cli_json(capsys, "dead", "-A", APP, "list")
    # oldest first; letters dead within the same millisecond sort by id
    assert sorted(d["task_id"] for d in listed) == sorted(["-dead-1", failed.id, "--dead-2"])
    times = [d["dead_at"] for d in listed]
    assert times == sorted(times)
    assert {d["task_id"]: d["reason"] for d in listed}["-dead-1"] == "unknown task"
    code, out, _ = cli(capsys, "dead", "-A", APP, "list")
    assert code == 0 and "3 dead letter(s)" in out and "bad address" in out

    shown = cli_json(capsys, "dead", "-A", APP, "show", "-dead-1")
    assert shown["name"] == "jobs.mul" and shown["args"] == [2, 3]
    code, out, _ = cli(capsys, "dead", "-A", APP, "show", failed.id)
    assert code == 0 and "ValueError: bad address" in out and "Traceback" in out
    code, out, _ = cli(capsys, "dead", "-A", APP, "show", "-nope")
    assert code == 1 and "no dead letter has the id '-nope'" in out

    assert cli_json(capsys, "dead", "-A", APP, "requeue", failed.id, "-nope") == {
        "requeued": 1, "unconfirmed": 0, "not_found": ["-nope"], "not_requeued": []}
    assert failed.status() == "queued"
    assert cli_json(capsys, "dead", "-A", APP, "purge", "--dead-2") == {
        "purged": 1, "not_found": []}
    code, out, err = cli(capsys, "dead", "-A", APP, "purge")
    assert code == 2 and "or --all for every one; none was given" in err
    purged = cli_json(capsys, "dead", "-A", APP, "purge", "--all", "--yes")
    assert purged == {"purged": 1, "not_found": []}
    assert cli_json(capsys, "dead", "-A", APP, "list") == []


def test_dead_requeue_all_puts_every_dead_letter_back(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    handles = [basic.fail.delay(str(n)) for n in range(3)]
    run_all()
    requeued = cli_json(capsys, "dead", "-A", APP, "requeue", "--all", "--yes")
    assert requeued == {"requeued": 3, "unconfirmed": 0, "not_found": [], "not_requeued": []}
    assert [h.status() for h in handles] == ["queued"] * 3


def test_dead_requeue_all_reads_ids_in_chunks_and_no_listing(
        url: str, capsys: pytest.CaptureFixture[str], redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--all`` takes the ids a chunk at a time (here 2) and reads one body, the one it
    requeues, at a time: 2,000 letters of 200 kB held 826 MB when read whole first. A
    letter it leaves (an id that is not UTF-8) is skipped by the next chunks."""
    handles = [basic.fail.delay(str(n)) for n in range(7)]
    run_all()
    client = redis_server.client()
    client.zadd(QUEUE.dead, {b"\xff-planted": 1})  # the oldest: it stays first
    chunks: List[int] = []
    taken = DeadLetterStore.ids

    def ids(store: DeadLetterStore, queue: str, limit: int, start: int = 0) -> List[bytes]:
        chunks.append(limit)
        return taken(store, queue, limit, start)

    def whole(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("requeue --all read the dead letters whole")

    monkeypatch.setattr(dead_command, "BULK_CHUNK", 2)
    monkeypatch.setattr(DeadLetterStore, "ids", ids)
    monkeypatch.setattr(DeadLetterStore, "letters", whole)
    code, out, err = cli(capsys, "dead", "-A", APP, "requeue", "--all", "--yes", "--json")
    assert json.loads(out) == {"requeued": 7, "unconfirmed": 0, "not_found": [], "not_requeued": [
        {"task_id": "\\xff-planted", "reason": dead_command.NOT_UTF8}]} and code == 1
    assert [h.status() for h in handles] == ["queued"] * 7
    assert client.zrange(QUEUE.dead, 0, -1) == [b"\xff-planted"]
    assert chunks and max(chunks) <= 2 and len(chunks) == 4


def test_purge_needs_yes_and_deletes_only_ready_tasks(
        url: str, capsys: pytest.CaptureFixture[str], redis_server: RedisServer) -> None:
    ready = [basic.add.delay(n, n) for n in range(3)] + [
        basic.add.apply_async((9, 9), task_id="-ready", priority=9)]
    scheduled = basic.add.apply_in(3600, 1, 1)
    running = basic.add.delay(5, 5)
    worker = basic.app.worker()
    jobs = [worker.fetch() for _ in range(5)]
    held = [job for job in jobs if job is not None and job.task_id == running.id]
    for job in jobs:
        if job is not None and job.task_id != running.id:
            worker.give_back(job)
    cancelled = basic.add.delay(7, 7)
    cancelled.cancel()

    code, _, err = cli(capsys, "purge", "-A", APP, "default")
    assert code == 2 and "the 4 ready task(s)" in err and "--yes" in err
    assert all(h.status() == "queued" for h in ready)

    code, out, _ = cli(capsys, "purge", "-A", APP, "default", "--yes")
    assert code == 0 and "deleted 4 ready task(s)" in out
    assert all(h.status() == "unknown" for h in ready)
    assert scheduled.status() == "scheduled" and running.status() == "running"
    client = redis_server.client()
    try:
        assert all(client.llen(key) == 0 for key in QUEUE.ready)
        assert client.zcard(QUEUE.cancelled) == 0
    finally:
        client.close()
    for job in held:
        worker.execute(job)
    assert running.status() == "succeeded"


def test_shutdown_of_a_worker_that_is_not_live_sends_nothing(
        url: str, capsys: pytest.CaptureFixture[str], redis_server: RedisServer) -> None:
    code, _, err = cli(capsys, "shutdown", "-A", APP, "ghost.1.abc")
    assert code == 1 and "no live worker of app 'basic' is named 'ghost.1.abc'" in err
    code, out, _ = cli(capsys, "shutdown", "-A", APP, "--all", "--yes")
    assert code == 0 and "no live worker" in out
    client = redis_server.client()
    try:
        assert client.keys("minitask:{basic}:control:*") == []
    finally:
        client.close()


def test_embedded_status_and_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from minitask.broker import embedded
    path = str(tmp_path / "embedded")
    stopped = cli_json(capsys, "embedded", "status", "--path", path)
    assert stopped["running"] is False and stopped["data_dir"] == path
    embedded.start(path)
    try:
        running = cli_json(capsys, "embedded", "status", "--path", path)
        assert running["running"] is True and isinstance(running["pid"], int)
        assert running["keys"] == 0 and running["url"].startswith("unix://")
    finally:
        code, out, _ = cli(capsys, "embedded", "stop", "--path", path)
    assert code == 0 and "stopped the embedded broker" in out
    assert cli_json(capsys, "embedded", "status", "--path", path)["running"] is False
    code, out, _ = cli(capsys, "embedded", "stop", "--path", path)
    assert code == 0 and "no embedded broker runs" in out


def test_status_says_what_processed_and_failed_count(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    worker = basic.app.worker()
    worker.beat()
    try:
        code, out, _ = cli(capsys, "status", "-A", APP)
    finally:
        worker.forget()
    assert code == 0 and "processed: tasks that succeeded; failed: attempts that failed" in out


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_worker_logs_name_the_task_a_record_comes_from(
        url: str, log_format: str, tmp_path: Path) -> None:
    handle = basic.chatty.delay("hi")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "minitask", "worker", "-A", APP, "--burst",
                           "--pool", "thread", "--log-format", log_format],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines: List[str] = done.stderr.splitlines()
    said = [line for line in lines if "chatty says hi" in line]
    assert len(said) == 1, done.stderr
    if log_format == "json":
        entries = [json.loads(line) for line in lines]
        (entry,) = [e for e in entries if e["message"] == "chatty says hi"]
        assert (entry["task_id"], entry["task_name"]) == (handle.id, "tests.apps.basic.chatty")
        assert entry["logger"] == "tests.apps.chatty" and entry["level"] == "WARNING"
    else:
        assert f"[tests.apps.basic.chatty {handle.id}] chatty says hi" in said[0]
    assert handle.get(timeout=5) == "hi"


def test_acting_on_everything_needs_yes_and_does_nothing_without_it(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    handles = [basic.fail.delay(str(n)) for n in range(2)]
    run_all()
    for action in ("requeue", "purge"):
        code, _, err = cli(capsys, "dead", "-A", APP, action, "--all")
        assert code == 2 and f"{action}s all 2 dead letter(s) of every queue" in err
        assert "add --yes" in err
        assert [h.status() for h in handles] == ["failed", "failed"]
    code, _, err = cli(capsys, "shutdown", "-A", APP, "--all")
    assert code == 2 and "stops all 0 live worker(s)" in err and "add --yes" in err


def test_purge_of_a_queue_the_app_does_not_have_names_its_queues_and_exits_1(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    handle = basic.add.delay(1, 2)
    code, out, err = cli(capsys, "purge", "-A", APP, "nosuchqueue", "--yes")
    assert code == 1 and "app 'basic' has no queue 'nosuchqueue'; its queues: " in err
    assert "default" in err and "deleted" not in out
    assert handle.status() == "queued"


def test_status_names_a_worker_whose_clock_is_far_from_redis(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    worker = basic.app.worker()
    worker.clock_skew_ms = -7_200_000  # as it measured at its start-up
    worker.redis_time._next = time.monotonic() + 3600  # not to be measured again yet
    worker.beat()
    try:
        code, out, _ = cli(capsys, "status", "-A", APP)
    finally:
        worker.forget()
    assert code == 0
    assert f"warning: worker {worker.name}'s clock is 7200.0 s behind Redis's" in out


def test_dead_with_a_queue_the_app_does_not_have_names_its_queues_and_exits_1(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "dead", "-A", APP, "list", "--queue", "nosuch")
    assert code == 1 and "app 'basic' has no queue 'nosuch'; its queues: " in err
    assert "no dead letters" not in out
