"""``minitask dashboard`` stopped by SIGTERM or SIGINT logs a last line saying so, as a
worker does, and exits 0 (trial34: it ended with no line; SIGTERM's default ended the
process before anything was closed). A real dashboard process; nothing it serves is
asked, so its broker URL points where nothing listens."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.processes import Processes, exit_code, send
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stopped_dashboard_says_it_stopped_and_why(processes: Processes, tmp_path: Path,
                                                     signum: signal.Signals) -> None:
    log = tmp_path / "dashboard.log"
    dashboard = processes.start("-m", "minitask", "dashboard", "-A", "tests.apps.basic",
                                "--port", "0", env={"MINITASK_BROKER_URL":
                                                    "redis://127.0.0.1:1/0"}, log=log)
    wait_until(lambda: "(metrics at /metrics)" in log.read_text(), timeout=60,
               message="the dashboard's first line")
    send(dashboard, signum)
    assert exit_code(dashboard) == 0, log.read_text()
    last = log.read_text().strip().splitlines()[-1]
    assert last.endswith(f"INFO    minitask.cli.dashboard: minitask dashboard of app 'basic' "
                         f"stopped ({signum.name} received)"), log.read_text()
