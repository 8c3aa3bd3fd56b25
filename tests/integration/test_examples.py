"""Every example runs: against the suite's own redis-server, and ``make demo`` as it is."""
from __future__ import annotations

import configparser
import os
import signal
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from minitask import Minitask
from tests.support.distributions import installed
from tests.support.paths import ROOT
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

PLUGIN = ROOT / "examples" / "plugin"
#: The examples' own database on the suite's server, emptied before each test.
DB = 9


@pytest.fixture
def broker_url(redis_server: RedisServer) -> str:
    client = redis_server.client(db=DB)
    try:
        client.flushdb()
    finally:
        client.close()
    return f"redis://127.0.0.1:{redis_server.port}/{DB}"


def run(processes: Processes, log: Path, *args: str, env: Dict[str, str],
        timeout: float = 60.0) -> str:
    """Run ``python *args`` to the end; return its output, failing on a non-zero exit."""
    process = processes.start(*args, env=env, log=log)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"python {' '.join(args)} still ran after {timeout} s:\n"
                    f"{log.read_text(errors='replace')}")
    output = log.read_text(errors="replace")
    assert code == 0, f"python {' '.join(args)} exited with {code}:\n{output}"
    return output


def stop(worker: "subprocess.Popen[bytes]", log: Path) -> None:
    """SIGTERM: the worker stops fetching, finishes what runs, and exits 0."""
    worker.send_signal(signal.SIGTERM)
    try:
        code = worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not stop within 30 s of SIGTERM:\n"
                    f"{log.read_text(errors='replace')}")
    assert code == 0, log.read_text(errors="replace")


def test_quickstart_producer_prints_every_result(processes: Processes, broker_url: str,
                                                 tmp_path: Path) -> None:
    env = {"MINITASK_BROKER_URL": broker_url}
    worker_log = tmp_path / "worker.log"
    worker = processes.worker("examples.quickstart.tasks", "--pool", "thread", "-c", "2",
                              env=env, log=worker_log)

    output = run(processes, tmp_path / "producer.log", "-m", "examples.quickstart.producer",
                 "--timeout", "20", env=env)

    lines = {line.split(" = ")[0].strip(): line.split(" = ")[1].split("  (task ")[0]
             for line in output.splitlines() if " = " in line}
    assert lines["add(2, 3)"] == "5"
    assert lines["add(10, 20) in 1 s"] == "30"
    assert lines["word_count(...)"] == repr({"the": 2, "cat": 2, "saw": 1, "other": 1})
    assert lines["patient_hello('ada')"].startswith("'hello ada, from attempt 2 of task ")
    assert [lines[f"add({n}, {n}) [delay_many]"] for n in range(5)] == ["0", "2", "4", "6", "8"]
    stop(worker, worker_log)


def test_orders_reset_email_outranks_the_newsletter_backlog(processes: Processes,
                                                            broker_url: str,
                                                            tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.txt"
    env = {"MINITASK_BROKER_URL": broker_url, "SHOP_OUTBOX": str(outbox)}
    producer_log = tmp_path / "producer.log"
    producer = processes.start("-m", "examples.orders.producer", "--timeout", "20",
                               "--sale-in", "0.5", env=env, log=producer_log)
    # The whole backlog is in Redis before any worker runs.
    shop = Minitask("shop", broker=broker_url)
    wait_until(lambda: shop.broker.queues.counts("emails")["ready"] == 8
               and shop.broker.queues.counts("default")["scheduled"] == 1,
               timeout=20, message="the producer's 8 emails and 1 sale to be enqueued")
    worker_log = tmp_path / "worker.log"
    # One thread: emails go out strictly in the order the worker takes them.
    worker = processes.worker("examples.orders.tasks", "--pool", "thread", "-c", "1",
                              env=env, log=worker_log)

    try:
        code = producer.wait(timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the producer still ran after 40 s:\n{producer_log.read_text()}")
    output = producer_log.read_text()
    assert code == 0, output
    stop(worker, worker_log)

    results = {line[:16].strip(): line[16:].split("  (task ")[0].strip()
               for line in output.splitlines()}
    assert results["password reset"] == ("succeeded  'emailed user42@example.com: Reset your "
                                         "password'")
    assert results["receipt"] == ("succeeded  'emailed ann@example.com: Receipt for order "
                                  "1001 (attempt 2)'")
    assert results["sale in 0.5 s"] == "succeeded  'brass lamp is now 20% off'"
    assert all(results[f"newsletter {n}"].startswith("succeeded") for n in range(1, 6))
    sent: List[str] = outbox.read_text().splitlines()
    assert sent[0] == "user42@example.com: Reset your password"
    assert sent[1] == "bob@example.com: Your brass lamp was sold (order 1001)"
    newsletters = [i for i, line in enumerate(sent) if "Newsletter" in line]
    assert len(newsletters) == 5 and min(newsletters) > 1
    assert shop.dead_letters() == []


def install_plugin_metadata(site: Path) -> Path:
    """Write into ``site`` the metadata ``pip install examples/plugin`` writes.

    Built from the plugin's own setup.cfg, so its entry points are the ones
    tested, without a build backend or network access during the tests.
    """
    config = configparser.ConfigParser()
    config.read(PLUGIN / "setup.cfg")
    name, version = config["metadata"]["name"], config["metadata"]["version"]
    lines: List[str] = []
    for group, value in config["options.entry_points"].items():
        lines.append(f"[{group}]")
        lines += [entry.strip() for entry in value.strip().splitlines()]
    installed(site, name, version, "\n".join(lines) + "\n")
    return site


ENQUEUE_REVIEW = ("from shop_plugin.tasks import ask_for_review; "
                  "handle = ask_for_review.delay(1001, 'ann@example.com'); print(handle.id)")


def test_plugin_adds_its_task_to_the_shop_worker(processes: Processes, broker_url: str,
                                                 tmp_path: Path) -> None:
    site = install_plugin_metadata(tmp_path / "site")
    path = os.pathsep.join([str(site), str(PLUGIN), str(ROOT)])
    env = {"MINITASK_BROKER_URL": broker_url, "PYTHONPATH": path}
    task_id = run(processes, tmp_path / "producer.log", "-c", ENQUEUE_REVIEW,
                  env=env).strip()

    # -A names only the shop's module: the entry point brings in the plugin's task.
    run(processes, tmp_path / "worker.log", "-m", "minitask", "worker", "-A",
        "examples.orders.tasks", "--pool", "thread", "--burst", env=env)

    shop = Minitask("shop", broker=broker_url)
    assert shop.handle(task_id).get(timeout=5) == "asked ann@example.com to review order 1001"


def test_without_the_plugin_installed_its_task_is_dead_lettered(processes: Processes,
                                                                broker_url: str,
                                                                tmp_path: Path) -> None:
    # The package is importable, but no metadata declares its entry point.
    path = os.pathsep.join([str(PLUGIN), str(ROOT)])
    env = {"MINITASK_BROKER_URL": broker_url, "PYTHONPATH": path}
    task_id = run(processes, tmp_path / "producer.log", "-c", ENQUEUE_REVIEW,
                  env=env).strip()

    run(processes, tmp_path / "worker.log", "-m", "minitask", "worker", "-A",
        "examples.orders.tasks", "--pool", "thread", "--burst", env=env)

    shop = Minitask("shop", broker=broker_url)
    assert shop.handle(task_id).status() == "failed"
    [dead] = shop.dead_letters("emails")
    assert (dead.task_id, dead.name, dead.exc_type) == (task_id, "reviews.ask_for_review",
                                                        "UnknownTaskError")


@pytest.mark.timeout(150)
def test_make_demo_runs_every_kind_of_task_and_exits_0(processes: Processes,
                                                       tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    # The demo makes its own throwaway embedded broker; the fixture unsets MINITASK_BROKER_URL.
    demo = processes.start(str(ROOT / "examples" / "demo.py"), log=log)
    try:
        code = demo.wait(timeout=90)
    except subprocess.TimeoutExpired:
        demo.send_signal(signal.SIGTERM)  # it stops its worker and embedded broker first
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        pytest.fail(f"the demo still ran after 90 s:\n{log.read_text(errors='replace')}")
    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "demo OK" in output
    assert "worker stopped by SIGTERM: exit code 0" in output
