"""The ``minitask`` command: real worker subprocesses, -A discovery, status, in-process main().

Workers run against the suite's own redis-server (``MINITASK_BROKER_URL``); the test
enqueues with an app of the same name, then checks results and Redis state.
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from minitask import AppNotFound, Minitask
from minitask.cli import main
from minitask.discovery import load_app
from minitask.broker.keys import AppKeys
from tests.support.distributions import installed
from tests.support.marks import parse_mark
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

EXIT_TIMEOUT = 90


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    client = redis_server.client()
    client.flushall()  # our own server: every test starts empty
    client.close()
    yield redis_server.url


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[Any]:
    connection = redis_server.client()
    try:
        yield connection
    finally:
        connection.close()


class Basic:
    """A producer's view of ``tests.apps.basic``: same app name, same task names."""

    def __init__(self, url: str) -> None:
        self.app = app = Minitask("basic", broker=url)

        @app.task(name="tests.apps.basic.add")
        def add(x: int, y: int) -> int:
            raise AssertionError("runs in the worker only")

        @app.task(name="tests.apps.basic.record")
        def record(key: str) -> str:
            raise AssertionError("runs in the worker only")

        self.add, self.record = add, record


def run_worker(processes: Processes, url: str, log: Path, *args: str,
               env: Dict[str, str] | None = None) -> int:
    process = processes.worker(*args, env={"MINITASK_BROKER_URL": url, **(env or {})},
                               log=log)
    try:
        return process.wait(timeout=EXIT_TIMEOUT)
    finally:
        if process.poll() is None:
            print(log.read_text(errors="replace"))


def run_command(processes: Processes, url: str, log: Path, *args: str,
                env: Dict[str, str] | None = None) -> int:
    process = processes.start("-m", "minitask", *args,
                              env={"MINITASK_BROKER_URL": url, **(env or {})}, log=log)
    return process.wait(timeout=EXIT_TIMEOUT)


def marks(client: Any, key: str) -> List[bytes]:
    return list(client.lrange(f"marks:done:{key}", 0, -1))


# -- worker --burst -------------------------------------------------------------

def test_thread_pool_burst_worker_runs_enqueued_tasks_then_exits_0(
        processes: Processes, url: str, client: Any, tmp_path: Path) -> None:
    basic = Basic(url)
    sums = [basic.add.delay(i, i) for i in range(10)]
    recorded = [basic.record.delay(f"k{i}") for i in range(5)]
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, "tests.apps.basic", "--pool", "thread", "--burst")
    assert code == 0, log.read_text(errors="replace")
    assert [h.get(timeout=5) for h in sums] == [2 * i for i in range(10)]
    assert [h.get(timeout=5) for h in recorded] == [f"k{i}" for i in range(5)]
    for i, handle in enumerate(recorded):
        [mark] = marks(client, f"k{i}")
        assert mark.decode().startswith(f"{handle.id}:1:")
    assert basic.app.broker.queues.counts("default") == {
        "ready": 0, "ready_by_priority": {}, "scheduled": 0, "running": 0, "dead": 0}


def test_process_pool_burst_worker_with_two_children_runs_tasks_then_exits_0(
        processes: Processes, url: str, client: Any, tmp_path: Path) -> None:
    basic = Basic(url)
    sums = [basic.add.delay(i, 1) for i in range(20)]
    recorded = [basic.record.delay(f"p{i}") for i in range(6)]
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, "tests.apps.basic", "--pool", "process", "-c", "2",
                      "--burst")
    assert code == 0, log.read_text(errors="replace")
    assert [h.get(timeout=5) for h in sums] == [i + 1 for i in range(20)]
    for i in range(6):
        [mark] = [parse_mark(raw) for raw in marks(client, f"p{i}")]
        assert (mark.task_id, mark.attempt) == (recorded[i].id, 1)
    assert all(h.status() == "succeeded" for h in recorded)
    assert basic.app.broker.queues.counts("default")["ready"] == 0


def test_module_colon_attribute_form_of_dash_a_names_the_app(
        processes: Processes, url: str, tmp_path: Path) -> None:
    basic = Basic(url)
    handle = basic.add.delay(40, 2)
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, "tests.apps.basic:app", "--pool", "thread",
                      "--burst")
    assert code == 0, log.read_text(errors="replace")
    assert handle.get(timeout=5) == 42


def test_burst_worker_serves_only_the_queues_given_with_dash_q(
        processes: Processes, url: str, tmp_path: Path) -> None:
    basic = Basic(url)
    served = basic.add.apply_async((1, 1), queue="fast")
    skipped = basic.add.apply_async((2, 2), queue="slow")
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, "tests.apps.basic", "--pool", "thread", "--burst",
                      "-Q", "fast")
    assert code == 0, log.read_text(errors="replace")
    assert served.get(timeout=5) == 2
    assert skipped.status() == "queued"


def test_burst_worker_leaves_tasks_due_later(processes: Processes, url: str,
                                             tmp_path: Path) -> None:
    basic = Basic(url)
    now = basic.add.delay(1, 2)
    later = basic.add.apply_in(3600, 3, 4)
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, "tests.apps.basic", "--pool", "thread", "--burst")
    assert code == 0, log.read_text(errors="replace")
    assert now.get(timeout=5) == 3
    assert later.status() == "scheduled"


@pytest.mark.parametrize("spec", [
    "no_such_module_for_minitask", "tests.apps.basic:no_such_attribute", "json",
    "tests.apps.basic:add", "tests.apps.no_such_app_module",
])
def test_bad_dash_a_exits_2_with_a_one_line_error(processes: Processes, url: str,
                                                  tmp_path: Path, spec: str) -> None:
    log = tmp_path / "worker.log"
    code = run_worker(processes, url, log, spec, "--pool", "thread", "--burst")
    output = log.read_text(errors="replace").strip().splitlines()
    assert code == 2
    assert len(output) == 1, output
    assert output[0].startswith("minitask: error:")
    assert repr(spec) in output[0] or spec.split(":")[0] in output[0]
    assert "Traceback" not in output[0]


# -- entry points ------------------------------------------------------------------

def write_distribution(root: Path) -> Path:
    """An installed-looking distribution: modules plus a real *.dist-info directory."""
    site = root / "site"
    site.mkdir()
    (site / "myshop_app.py").write_text(textwrap.dedent('''
        from minitask import Minitask

        app = Minitask("myshop")


        @app.task(name="myshop.hello")
        def hello(who):
            return "hello " + who
    '''))
    plugin = site / "myshop_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("")
    (plugin / "tasks.py").write_text(textwrap.dedent('''
        from myshop_app import app


        @app.task(name="myshop_plugin.refund", queue="refunds")
        def refund(order_id, amount):
            return {"order": order_id, "refunded": amount}
    '''))
    broken = site / "other_plugin"
    broken.mkdir()
    (broken / "__init__.py").write_text("")
    (broken / "tasks.py").write_text("raise RuntimeError('plugin of another app imported')\n")
    installed(site, "myshop", "1.0", '''
        [minitask.apps]
        myshop = myshop_app:app

        [minitask.tasks]
        myshop = myshop_plugin.tasks
        otherapp = other_plugin.tasks
    ''')
    return site


class MyShop:
    """The producer side of the plugin app: same app name and task names."""

    def __init__(self, url: str) -> None:
        self.app = app = Minitask("myshop", broker=url)

        @app.task(name="myshop.hello")
        def hello(who: str) -> str:
            raise AssertionError("runs in the worker only")

        @app.task(name="myshop_plugin.refund", queue="refunds")
        def refund(order_id: int, amount: float) -> Any:
            raise AssertionError("runs in the worker only")

        self.hello, self.refund = hello, refund


@pytest.mark.parametrize("spec", ["myshop", "myshop_app", "myshop_app:app"])
def test_app_from_an_entry_point_runs_tasks_a_plugin_registered(
        processes: Processes, url: str, tmp_path: Path, spec: str) -> None:
    site = write_distribution(tmp_path)
    shop = MyShop(url)
    greeting = shop.hello.delay("ada")
    refund = shop.refund.delay(7, 12.5)
    log = tmp_path / "worker.log"
    pythonpath = f"{site}:{processes.env['PYTHONPATH']}"
    code = run_worker(processes, url, log, spec, "--pool", "thread", "--burst",
                      env={"PYTHONPATH": pythonpath})
    assert code == 0, log.read_text(errors="replace")
    assert greeting.get(timeout=5) == "hello ada"
    # the plugin's queue is served by default: plugins load before the worker starts
    assert refund.get(timeout=5) == {"order": 7, "refunded": 12.5}
    assert shop.app.dead_letters() == []


def test_status_of_an_entry_point_app_lists_the_plugin_queue(
        processes: Processes, url: str, tmp_path: Path) -> None:
    site = write_distribution(tmp_path)
    shop = MyShop(url)
    shop.refund.delay(1, 1.0)
    shop.refund.delay(2, 2.0)
    log = tmp_path / "status.log"
    pythonpath = f"{site}:{processes.env['PYTHONPATH']}"
    code = run_command(processes, url, log, "status", "-A", "myshop", "--json",
                       env={"PYTHONPATH": pythonpath})
    assert code == 0, log.read_text(errors="replace")
    report = json.loads(log.read_text())
    assert report["app"] == "myshop"
    assert report["queues"]["refunds"]["ready"] == 2


def test_missing_dependency_of_the_app_module_is_not_reported_as_a_missing_app(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shopapp.py").write_text("import shop  # a dependency that is not installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shopapp", raising=False)
    with pytest.raises(Exception) as caught:
        load_app("shopapp")
    assert "'shop'" in str(caught.value), str(caught.value)


def test_module_holding_several_apps_is_refused_with_the_choice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "two_apps_module.py").write_text(
        "from minitask import Minitask\nfirst = Minitask('one')\nsecond = Minitask('two')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AppNotFound) as caught:
        load_app("two_apps_module")
    assert "first" in str(caught.value) and "second" in str(caught.value)
    assert load_app("two_apps_module:second").name == "two"


# -- status ----------------------------------------------------------------------

def test_status_json_prints_counts_per_queue_and_live_workers(
        processes: Processes, url: str, client: Any, tmp_path: Path) -> None:
    basic = Basic(url)
    ghost_app = Minitask("basic", broker=url)

    @ghost_app.task(name="tests.apps.basic.ghost")
    def ghost() -> None:
        pass

    ghost.delay()
    Minitask("basic", broker=url).worker(queues=["default"], burst=True).run()  # -> dead

    basic.add.apply_async((1, 1), priority=9)
    basic.add.apply_async((2, 2), priority=9)
    basic.add.delay(3, 3)
    basic.add.apply_async((4, 4), priority=0)
    basic.add.apply_in(3600, 6, 6)
    basic.add.apply_async((7, 7), priority=2, queue="other")
    running = Minitask("basic", broker=url).worker(queues=["default"]).fetch()
    assert running is not None  # leased, never acked: "running"

    idle = processes.worker("tests.apps.basic", "--pool", "thread", "-Q", "idle",
                            env={"MINITASK_BROKER_URL": url, "TEST_VISIBILITY": "3"},
                            log=tmp_path / "idle-worker.log")
    wait_until(lambda: client.zcard(AppKeys("basic").workers) >= 1, timeout=60,
               message="the idle worker's heartbeat")
    assert idle.poll() is None

    log = tmp_path / "status.log"
    code = run_command(processes, url, log, "status", "-A", "tests.apps.basic", "--json")
    assert code == 0, log.read_text(errors="replace")
    report = json.loads(log.read_text())
    assert report["app"] == "basic"
    default = report["queues"]["default"]
    # the p9 task fetched first is running
    assert default == {"ready": 3, "ready_by_priority": {"9": 1, "5": 1, "0": 1},
                       "scheduled": 1, "running": 1, "dead": 1}
    assert report["queues"]["other"]["ready_by_priority"] == {"2": 1}
    assert report["queues"]["idle"]["ready"] == 0
    [worker] = report["workers"]
    assert worker["queues"] == "idle"
    assert worker["pool"] == "thread"
    assert 0 <= worker["heartbeat_age_s"] < 30
    assert worker["processed"] == 0 and worker["failed"] == 0
    assert int(worker["pid"]) == idle.pid

    text_log = tmp_path / "status.txt"
    assert run_command(processes, url, text_log, "status", "-A", "tests.apps.basic") == 0
    text = text_log.read_text()
    assert "default" in text and "other" in text and "1 live worker" in text


# -- in-process main() -------------------------------------------------------------

@pytest.fixture
def in_process(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MINITASK_BROKER_URL", url)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the cwd on it
    return url


def test_main_runs_a_burst_worker_in_process_and_returns_0(in_process: str) -> None:
    basic = Basic(in_process)
    handles = [basic.add.delay(i, 100) for i in range(5)]
    assert main(["worker", "-A", "tests.apps.basic", "--pool", "thread", "--burst"]) == 0
    assert [h.get(timeout=5) for h in handles] == [100 + i for i in range(5)]


def test_main_status_json_in_process(in_process: str, capsys: pytest.CaptureFixture[str]) -> None:
    basic = Basic(in_process)
    basic.add.apply_async((1, 2), priority=7)
    basic.add.apply_in(60, 1, 2)
    assert main(["status", "-A", "tests.apps.basic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queues"]["default"]["ready_by_priority"] == {"7": 1}
    assert report["queues"]["default"]["scheduled"] == 1
    assert report["workers"] == []


def test_status_does_not_count_a_cancelled_task_as_ready(
        in_process: str, capsys: pytest.CaptureFixture[str]) -> None:
    basic = Basic(in_process)
    kept = basic.add.delay(1, 1)
    cancelled = basic.add.delay(2, 2)
    assert cancelled.cancel() is True
    assert main(["status", "-A", "tests.apps.basic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queues"]["default"]["ready"] == 1
    assert report["queues"]["default"]["ready_by_priority"] == {"5": 1}
    assert main(["worker", "-A", "tests.apps.basic", "--pool", "thread", "--burst"]) == 0
    assert kept.get(timeout=5) == 2
    assert cancelled.status() == "cancelled"


@pytest.mark.parametrize("spec", ["no_such_module_for_minitask", "json",
                                  "tests.apps.basic:nothing_here"])
def test_main_returns_2_with_a_one_line_error_for_a_bad_dash_a(
        in_process: str, capsys: pytest.CaptureFixture[str], spec: str) -> None:
    assert main(["worker", "-A", spec, "--pool", "thread", "--burst"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("minitask: error:")


def test_main_requires_a_command_and_dash_a(in_process: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["worker"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2


def test_python_dash_m_minitask_help_exits_0(processes: Processes, url: str,
                                             tmp_path: Path) -> None:
    log = tmp_path / "help.log"
    assert run_command(processes, url, log, "--help") == 0
    assert "worker" in log.read_text()
