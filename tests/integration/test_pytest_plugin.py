"""The pytest plugin, used as a project would: its pytest.ini names the app; every test is
isolated (nothing reaches the real broker), and the fixture ``minitask_app`` is the app.
``examples/orders/test_orders.py`` is such a project's test file, run here in a fresh
project directory with the plugin loaded as its entry point would load it."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.paths import ROOT
from tests.support.pytest_runs import plugin_options
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path, redis_server: RedisServer) -> Iterator[Path]:
    """A user's project: its own pytest.ini, tests, and a real broker in the environment
    that the isolated tests must never write to."""
    client = redis_server.client(db=7)
    client.flushdb()
    (tmp_path / "tests").mkdir()
    try:
        yield tmp_path
        assert client.keys("*") == [], "an isolated test wrote to the real broker"
    finally:
        client.flushdb()
        client.close()


def run_pytest(project: Path, redis_server: RedisServer,
               *args: str) -> "subprocess.CompletedProcess[str]":
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "MINITASK_BROKER_URL": f"redis://127.0.0.1:{redis_server.port}/7"}
    load = plugin_options()
    return subprocess.run([sys.executable, "-m", "pytest", *load,
                           "-p", "no:cacheprovider", "-q", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def write_ini(project: Path, app: str) -> None:
    (project / "pytest.ini").write_text(f"[pytest]\nminitask_app = {app}\n"
                                        f"filterwarnings =\n    error\n")


def test_the_orders_example_is_tested_with_the_plugin(project: Path,
                                                      redis_server: RedisServer) -> None:
    write_ini(project, "examples.orders.tasks:app")
    shutil.copy(ROOT / "examples" / "orders" / "test_orders.py", project / "tests")

    done = run_pytest(project, redis_server)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout


def test_tests_that_do_not_ask_for_the_fixture_are_isolated_too(
        project: Path, redis_server: RedisServer) -> None:
    write_ini(project, "examples.orders.tasks")
    (project / "tests" / "test_plain.py").write_text(textwrap.dedent("""
        from minitask.testing import drain
        from examples.orders.tasks import app, send_password_reset

        def test_enqueue_without_the_fixture():
            handle = send_password_reset.delay(1)
            assert drain(app) == 1
            assert handle.status() == "succeeded"
    """))

    done = run_pytest(project, redis_server)

    assert done.returncode == 0, done.stdout + done.stderr


def test_the_fixture_without_the_ini_option_says_what_to_add(
        project: Path, redis_server: RedisServer) -> None:
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "tests" / "test_fixture.py").write_text(
        "def test_it(minitask_app):\n    pass\n")

    done = run_pytest(project, redis_server)

    assert done.returncode == 1
    assert "minitask_app = package.module:app" in done.stdout


def test_an_ini_option_naming_no_app_is_a_usage_error(
        project: Path, redis_server: RedisServer) -> None:
    write_ini(project, "no_such_module:app")
    (project / "tests" / "test_any.py").write_text("def test_it():\n    pass\n")

    done = run_pytest(project, redis_server)

    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "minitask_app = 'no_such_module:app'" in done.stderr


def test_setup_cfg_registers_the_plugin_and_the_testing_extra() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    entry_points = config["options.entry_points"]["pytest11"].split()
    assert entry_points == ["minitask", "=", "minitask.pytest_plugin"]
    assert "fakeredis[lua]" in config["options.extras_require"]["testing"]


def test_the_orders_example_runs_as_the_docs_say_from_the_repository(
        redis_server: RedisServer) -> None:
    """``pytest examples/orders/test_orders.py`` from the root, with no -o: the example
    folder's own pytest.ini names the app, as a project's would."""
    load = plugin_options()
    env = {**os.environ, "MINITASK_BROKER_URL": f"redis://127.0.0.1:{redis_server.port}/7"}
    done = subprocess.run([sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider",
                           "-q", "examples/orders/test_orders.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout
