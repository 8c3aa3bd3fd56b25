"""``-A`` that names a path, a file or nothing: one clear line, exit 2, nothing imported.

Run in-process through ``minitask.cli.main`` from a project directory (``tmp_path``)
whose modules write a marker file when imported, so a test sees whether the CLI
ran code the user did not name.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Iterator, List

import pytest

from minitask.cli import main
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP_MODULE = textwrap.dedent('''
    from pathlib import Path

    from minitask import Minitask

    Path(__file__).with_suffix(".imported").write_text("imported")
    app = Minitask("hardening_cli")


    @app.task(name="hardening.add")
    def add(x, y):
        return x + y
''')


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            redis_server: RedisServer) -> Iterator[Path]:
    """A project directory, the current one, with app modules that mark their import."""
    for name in ("hardening_app", "hardening_tasks"):
        (tmp_path / f"{name}.py").write_text(APP_MODULE)
    package = tmp_path / "hardening_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text(APP_MODULE)
    (package / "py.py").write_text(APP_MODULE)  # a submodule named py: hardening_pkg.py
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the cwd on it
    before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        for name in set(sys.modules) - before:
            if name.startswith("hardening_"):
                del sys.modules[name]


def imported(project: Path) -> List[str]:
    return sorted(str(p.relative_to(project)) for p in project.rglob("*.imported"))


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("minitask: error:"), err
    assert "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("spec, words", [
    ("../pkg", ["'../pkg'", "path"]),
    ("..pkg", ["'..pkg'", "relative"]),
    (".pkg", ["'.pkg'", "relative", "-A pkg"]),
    ("./hardening_app.py", ["-A hardening_app"]),
    ("hardening_pkg/app.py", ["-A hardening_pkg.app"]),
    ("hardening_pkg/app", ["-A hardening_pkg.app"]),
    ("/abs/path/app.py", ["path"]),
    ("", ["''", "module"]),
    (":app", ["':app'", "module"]),
    ("hardening_app:", ["'hardening_app:'", "attribute"]),
    ("hardening_app:not-a-name", ["'not-a-name'"]),
    ("my-app", ["'my-app'", "not a module name"]),
    ("1st_app", ["'1st_app'"]),
    ("a..b", ["'a..b'"]),
    ("pkg.", ["'pkg.'"]),
], ids=repr)
def test_a_dash_a_that_is_no_module_name_exits_2_with_one_line_importing_nothing(
        project: Path, capsys: pytest.CaptureFixture[str], spec: str,
        words: List[str]) -> None:
    assert main(["worker", "-A", spec, "--pool", "thread", "--burst"]) == 2
    line = error_line(capsys)
    for word in words:
        assert word in line, line
    assert imported(project) == []


@pytest.mark.parametrize("spec, module", [
    ("hardening_app.py", "hardening_app"), ("hardening_tasks.py", "hardening_tasks"),
    ("hardening_tasks.py:app", "hardening_tasks:app"),
    ("hardening_pkg.app.py", "hardening_pkg.app"),
], ids=repr)
def test_a_file_name_suggests_the_module_name_without_importing_it(
        project: Path, capsys: pytest.CaptureFixture[str], spec: str, module: str) -> None:
    assert main(["status", "-A", spec]) == 2
    line = error_line(capsys)
    assert f"-A {module}" in line and ".py" in line, line
    assert imported(project) == []
    assert "hardening_app" not in sys.modules and "hardening_tasks" not in sys.modules


def test_a_module_that_is_not_there_with_dot_py_says_so(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "-A", "no_such_hardening_module.py"]) == 2
    assert "no_such_hardening_module" in error_line(capsys)


def test_a_package_submodule_named_py_is_still_a_module(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "-A", "hardening_pkg.py", "--json"]) == 0
    assert '"app": "hardening_cli"' in capsys.readouterr().out
    assert imported(project) == ["hardening_pkg/py.imported"]


def test_the_module_name_itself_still_works(project: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "-A", "hardening_tasks:app", "--json"]) == 0
    assert '"app": "hardening_cli"' in capsys.readouterr().out
    assert imported(project) == ["hardening_tasks.imported"]
