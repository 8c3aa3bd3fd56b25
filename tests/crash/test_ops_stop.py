"""Stopping, as an operator sees it: a clean stop logs no ERROR (the process pool used to
log a child "dying" with a task it had finished), ``minitask shutdown`` stops a busy
worker through Redis as SIGTERM does, and a child that dies names its task."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import List

import pytest

from minitask.cli import main
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

POOLS = ["process", "thread"]


def log_of(kit: Kit, index: int = 0) -> str:
    return (kit.logs / f"worker-{index}.log").read_text(errors="replace")


def errors_in(text: str) -> List[str]:
    return [line for line in text.splitlines() if " ERROR " in line or "Traceback" in line]


def wait_for_log(kit: Kit, needle: str, index: int = 0) -> None:
    path: Path = kit.logs / f"worker-{index}.log"
    wait_until(lambda: path.exists() and needle in path.read_text(errors="replace"),
               timeout=DEADLINE, message=f"{needle!r} in the worker's log")


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
@pytest.mark.parametrize("pool", POOLS)
def test_a_clean_stop_while_a_task_runs_logs_no_error(kit: Kit, pool: str, how: str) -> None:
    """The issue's case: -c 1, a 2 s task, SIGTERM (or Ctrl-C, which signals the whole
    process group) while it runs."""
    worker = kit.worker("--pool", pool, "-c", "1")
    handle = kit.tasks.slow.delay("clean", 2.0)
    kit.wait_for_marks("started", "clean")

    if how == "SIGTERM":
        send(worker, signal.SIGTERM)
    else:
        send(worker, signal.SIGINT, group=True)

    assert exit_code(worker) == 0
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()
    log = log_of(kit)
    assert errors_in(log) == [], log
    assert f"task {handle.id} tests.apps.basic.slow succeeded" in log


@pytest.mark.parametrize("pool", POOLS)
def test_shutdown_stops_a_busy_worker_as_sigterm_does(
        kit: Kit, pool: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    worker = kit.worker("--pool", pool, "-c", "2")
    wait_until(lambda: kit.live_workers() == 1, timeout=DEADLINE, message="a live worker")
    handle = kit.tasks.slow.delay("busy", 3.0)
    kit.wait_for_marks("started", "busy")

    monkeypatch.setenv("MINITASK_BROKER_URL", kit.server.url)
    assert main(["shutdown", "-A", "tests.apps.basic", "--all", "--yes"]) == 0
    assert "asked worker" in capsys.readouterr().out
    # acted on while the task still runs: the idle slot stops waiting for tasks (and the
    # listener has taken its order), so a task sent now is left for another worker
    wait_until(lambda: kit.blocked_clients() == 0, timeout=DEADLINE,
               message="the worker to stop waiting for tasks")
    assert worker.poll() is None, "still finishing the running task"
    later = kit.tasks.record.delay("after-shutdown")

    assert exit_code(worker) == 0
    assert handle.status() == "succeeded"
    assert len(kit.marks("done", "busy")) == 1
    assert later.status() == "queued" and kit.marks("done", "after-shutdown") == []
    assert kit.live_workers() == 0
    assert "minitask shutdown received" in log_of(kit)
    assert errors_in(log_of(kit)) == [], log_of(kit)


def test_shutdown_names_one_worker_and_leaves_the_others(
        kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    first = kit.worker("--pool", "thread", "-c", "1")
    second = kit.worker("--pool", "process", "-c", "1")
    wait_until(lambda: kit.live_workers() == 2, timeout=DEADLINE, message="two live workers")
    names = sorted(name.decode() for name in kit.client.zrange("minitask:{basic}:workers", 0, -1))
    pids = {name: int(name.split(".")[-2]) for name in names}
    target = next(name for name in names if pids[name] == second.pid)

    monkeypatch.setenv("MINITASK_BROKER_URL", kit.server.url)
    assert main(["shutdown", "-A", "tests.apps.basic", target, "--wait", "30"]) == 0

    assert exit_code(second) == 0
    assert first.poll() is None
    assert kit.tasks.record.delay("still-served").get(timeout=DEADLINE) == "still-served"
    send(first, signal.SIGTERM)
    assert exit_code(first) == 0


def test_a_child_that_dies_names_the_task_it_was_running(kit: Kit) -> None:
    worker = kit.worker("--pool", "process", "-c", "1", max_deliveries=10)
    handle = kit.tasks.poison.delay("named")
    kit.wait_for_marks("started", "named")
    wait_for_log(kit, f"while running task {handle.id}")
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0


@pytest.mark.parametrize("pool", POOLS)
def test_a_second_ctrl_c_says_it_exits_at_once(kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "1")
    kit.tasks.slow.delay("interrupted", 30.0)
    kit.wait_for_marks("started", "interrupted")

    send(worker, signal.SIGINT, group=True)
    wait_for_log(kit, "SIGINT received")
    send(worker, signal.SIGINT, group=True)

    assert exit_code(worker) == 130
    assert "second interrupt" in log_of(kit)


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_an_order_no_minitask_wrote_leaves_shutdown_working(
        kit: Kit, pool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An order that is not UTF-8 in a worker's orders list is ignored, said once,
    escaped (it ended the listener thread: ``minitask shutdown`` then reached no one)."""
    worker = kit.worker("--pool", pool, "-c", "1")
    wait_until(lambda: kit.live_workers() == 1, timeout=DEADLINE, message="a live worker")
    [name] = [raw.decode() for raw in kit.client.zrange("minitask:{basic}:workers", 0, -1)]
    kit.client.rpush(f"minitask:{{basic}}:control:{name}", b"\xff\x1b[2Jforged\nERROR x")
    wait_for_log(kit, "ignores the unknown order")
    assert kit.tasks.record.delay("still-served").get(timeout=DEADLINE) == "still-served"

    monkeypatch.setenv("MINITASK_BROKER_URL", kit.server.url)
    assert main(["shutdown", "-A", "tests.apps.basic", name, "--wait", "30"]) == 0
    assert exit_code(worker) == 0
    log = log_of(kit)
    assert "\x1b" not in log and "Traceback" not in log, log
    assert "\\xff\\x1b[2Jforged\\nERROR x" in log, log
