"""The dashboard's server says, at WARNING, that it closed slow or idle connections
(silent past a bound, or closed for a newer one when every connection was taken):
it said so only at DEBUG, so an operator never saw a flood of slow clients. At most
one line per ``CLOSED_SAID_EVERY`` seconds, counting those closed since the last line:
a flood makes one line, not one per connection (issue 29, a low finding)."""
from __future__ import annotations

import logging
import socket
import time
from typing import Any, Iterator, List

import pytest

from minitask import Minitask
from minitask.dashboard import server as dashboard_server
from tests.support.dashboards import closed_by_peer, serving

pytestmark = pytest.mark.integration

DEADLINE = 30.0


@pytest.fixture
def served(redis_server: Any) -> Iterator[Any]:
    app = Minitask("dash", broker=redis_server.url)
    try:
        with serving(app, max_connections=3, idle_timeout=0.3,
                     request_timeout=0.6) as server:
            yield server
    finally:
        app.close()


def _said(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [record for record in caplog.records
            if record.name == dashboard_server.__name__ and "slow or idle" in record.message]


def _wait_said(caplog: pytest.LogCaptureFixture, count: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while len(_said(caplog)) < count:  # the thread logs as it lets go
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.02)


def test_closed_slow_connections_are_said_at_warning_once_per_period_with_a_count(
        served: Any, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG, logger=dashboard_server.__name__)
    port = served.server_port
    silent: List[socket.socket] = []
    try:
        for n in range(8):  # past max_connections: some closed for newer ones
            sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
            if n % 2:
                sock.sendall(b"GET / HT")  # a request never finished
            silent.append(sock)
        assert all(closed_by_peer(sock) for sock in silent)
        _wait_said(caplog, 1)
        time.sleep(0.5)  # the others' threads let go too
        first = _said(caplog)
        assert len(first) == 1, caplog.text  # one line for the flood, not eight
        assert first[0].levelno == logging.WARNING
        assert "closed 1 slow or idle connection(s)" in first[0].message, first[0].message
        # the next line, once the period is over, counts those held back since
        monkeypatch.setattr(dashboard_server, "CLOSED_SAID_EVERY", 0.0)
        last = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        silent.append(last)
        assert closed_by_peer(last)
        _wait_said(caplog, 2)
        second = _said(caplog)[1]
    finally:
        for sock in silent:
            sock.close()
    assert second.levelno == logging.WARNING
    assert "closed 8 slow or idle connection(s)" in second.message, second.message
    assert "127.0.0.1" in second.message
