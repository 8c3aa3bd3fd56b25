"""examples/logfanout runs: processors against the suite's redis-server with the
producer, and its ``make demo`` script on its own embedded broker."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from examples.logfanout.tasks import app
from tests.support.paths import ROOT
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: The example's own database on the suite's server, emptied first.
DB = 10


def _finish(process: "subprocess.Popen[bytes]", log: Path, timeout: float = 90) -> str:
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s:\n{log.read_text(errors='replace')}")
    output = log.read_text(errors="replace")
    assert code == 0, output
    return output


def test_every_processor_analyses_every_line_and_the_producer_prints_their_totals(
        redis_server: RedisServer, processes: Processes, tmp_path: Path) -> None:
    client = redis_server.client(db=DB)
    client.flushdb()
    url = f"redis://127.0.0.1:{redis_server.port}/{DB}"
    env = {"MINITASK_BROKER_URL": url}
    for name in ("p1", "p2"):
        processes.worker("examples.logfanout.tasks", "--pool", "thread", "--name", name,
                         env=env, log=tmp_path / f"{name}.log")
    key = "minitask:{logfanout:logs}:bcast:cursors"
    wait_until(lambda: client.hlen(key) == 2, timeout=60, message="two processors")
    log = tmp_path / "producer.log"
    output = _finish(processes.start("-m", "examples.logfanout.producer", "--batch", "40",
                                     env=env, log=log), log)
    assert "sent 240 lines" in output and "as 6 broadcast calls to 2 processor(s)" in output
    for name in ("p1", "p2"):
        assert f"processor {name}: 240 lines, 11918 bytes (ERROR 26, INFO 163, WARNING 51)" \
            in output
    assert app.name == "logfanout"
    client.close()


@pytest.mark.timeout(180)
def test_the_logfanout_demo_runs_on_its_own_broker_and_exits_0(
        processes: Processes, tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    output = _finish(processes.start(str(ROOT / "examples" / "logfanout" / "demo.py"),
                                     log=log), log, timeout=150)
    assert "logfanout OK" in output
    assert output.count(": 240 lines, 11918 bytes") == 3  # p1, p2 and p3
