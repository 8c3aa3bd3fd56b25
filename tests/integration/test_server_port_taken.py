"""A test's redis-server never ends up being another process's: a free port another
process binds first (another xdist worker's server, another test run) is chosen again,
and a port given that is taken fails, named, instead of handing the test the other
server."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.support import servers
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def other(tmp_path: Path) -> Iterator[RedisServer]:
    """Another process's server, holding the port a test's server would choose."""
    server = RedisServer(0, tmp_path / "other")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def own_pid(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.info("server")["process_id"])


def test_a_chosen_port_taken_before_the_server_binds_it_is_chosen_again(
        other: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ports = iter([other.port, servers.free_port()])
    monkeypatch.setattr(servers, "free_port", lambda: next(ports))
    mine = RedisServer(0, tmp_path / "mine")
    mine.start()
    try:
        assert mine.port != other.port
        assert mine.process is not None and mine.process.poll() is None
        assert own_pid(mine) == mine.process.pid
        assert own_pid(other) != mine.process.pid
    finally:
        mine.stop()


def test_a_port_given_that_is_taken_fails_naming_it(other: RedisServer, tmp_path: Path) -> None:
    mine = RedisServer(other.port, tmp_path / "mine")
    try:
        with pytest.raises(RuntimeError, match=rf"127\.0\.0\.1:{other.port} .*port taken"):
            mine.start()
        assert mine.process is None
    finally:
        mine.stop()
    assert own_pid(other) == other.process.pid  # type: ignore[union-attr]
