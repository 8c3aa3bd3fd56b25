"""An ``-A`` entry point of ``minitask.apps`` whose module is gone (a package uninstalled
or moved, its distribution's metadata left behind) or whose module imports one that is
not installed ended the command with a raw ModuleNotFoundError traceback (probe35, LOW).
Now it is one line, exit code 2, naming the entry point, its distribution and the
missing module; the command connects to no Redis first."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from minitask.cli import main
from tests.support.distributions import installed
from tests.support.processes import Processes

pytestmark = pytest.mark.integration

#: No Redis listens there: the error comes before any connection.
NOWHERE = "redis://127.0.0.1:1/0"


def _site(tmp_path: Path) -> Path:
    """A site directory holding the distribution ``stale`` 2.0, whose entry points name a
    module that is not there and one that imports a module that is not installed."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "needy_app.py").write_text("import needy_dependency_gone  # not installed\n")
    installed(site, "stale", "2.0", '''
        [minitask.apps]
        stale = stale_app_gone.tasks:app
        needy = needy_app:app
    ''')
    return site


@pytest.mark.parametrize("spec, why", [
    ("stale", "its module 'stale_app_gone.tasks' is not installed"),
    ("needy", "its module 'needy_app' imports 'needy_dependency_gone', which is not installed"),
])
def test_an_entry_point_whose_module_is_missing_is_said_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        spec: str, why: str) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", NOWHERE)
    monkeypatch.setattr(sys, "path", [str(_site(tmp_path)), *sys.path])  # main() adds the cwd
    monkeypatch.delitem(sys.modules, "needy_app", raising=False)
    assert main(["status", "-A", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    said = err[0]
    assert said.startswith(f"minitask: error: entry point {spec!r} of group 'minitask.apps'")
    assert "distribution 'stale' 2.0" in said and why in said, said


def test_the_command_prints_no_traceback(processes: Processes, tmp_path: Path) -> None:
    site = _site(tmp_path)
    log = tmp_path / "status.log"
    process = processes.start("-m", "minitask", "status", "-A", "stale", log=log, env={
        "MINITASK_BROKER_URL": NOWHERE,
        "PYTHONPATH": f"{site}:{processes.env['PYTHONPATH']}"})
    assert process.wait(timeout=60) == 2, log.read_text()
    said = log.read_text()
    assert "Traceback" not in said and "stale_app_gone" in said, said
