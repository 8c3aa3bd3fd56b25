"""The ``pytest`` command, as the tutorial and the testing guide say to run it, finds
the project's app: unlike ``python -m pytest`` it puts no current directory on the
path, and the plugin loads the app before pytest adds any test's folder (issue 29's
trial: the tutorial's step 6 failed as written). ``python -P -m pytest`` is that
command: ``-P`` leaves the current directory off the path, as a console script does."""
from __future__ import annotations

import configparser
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.pytest_runs import plugin_options
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def pytest_command(cwd: Path, redis_server: RedisServer,
                   *args: str) -> "subprocess.CompletedProcess[str]":
    """``pytest ARGS`` in ``cwd``, with minitask importable (installed) but nothing of
    the repository's or the project's own on the path."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["MINITASK_BROKER_URL"] = f"redis://127.0.0.1:{redis_server.port}/7"
    return subprocess.run([sys.executable, "-P", "-m", "pytest", *plugin_options(), "-p",
                           "no:cacheprovider", "-q", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_tutorials_project_is_tested_with_the_pytest_command(
        tmp_path: Path, redis_server: RedisServer) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nminitask_app = pipeline:app\n")
    (tmp_path / "pipeline.py").write_text(textwrap.dedent("""
        from minitask import Minitask

        app = Minitask("pipeline")

        @app.task
        def double(n):
            return 2 * n
    """))
    (tmp_path / "test_pipeline.py").write_text(textwrap.dedent("""
        from minitask.testing import drain
        from pipeline import double

        def test_double(minitask_app):
            handle = double.delay(21)
            assert drain(minitask_app) == 1
            assert handle.get(timeout=1) == 42
    """))

    done = pytest_command(tmp_path, redis_server)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_orders_example_is_tested_with_the_pytest_command_from_the_root(
        redis_server: RedisServer) -> None:
    done = pytest_command(ROOT, redis_server, "examples/orders/test_orders.py")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout


def test_a_missing_module_is_named_by_the_ini_option_not_by_minus_a(
        tmp_path: Path, redis_server: RedisServer) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nminitask_app = nowhere:app\n")
    (tmp_path / "test_any.py").write_text("def test_it():\n    pass\n")

    done = pytest_command(tmp_path, redis_server)

    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "minitask_app = 'nowhere:app': no entry point" in done.stderr
    assert "-A" not in done.stderr


def test_the_testing_extra_brings_the_pytest_the_tutorial_runs() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = config["options.extras_require"]
    for extra in ("testing", "all"):
        assert "pytest>=" in extras[extra], extra
