"""A broker URL whose port is another service's (an HTTP server, say) is said so:
redis-py could not read its reply, and minitask called that a command Redis had
refused for its proto-max-bulk-len, sending the user to tune max_message_bytes
(issue 29, probe36 F4). A TCP server of the test's own answers every connection
with an HTML page; a producer and a real worker process are pointed at it."""
from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.processes import Processes, exit_code

pytestmark = pytest.mark.integration

PAGE = b"<html><body>not redis</body></html>\r\n"
SAID = "could not be read as a Redis reply"


@pytest.fixture
def not_redis() -> Iterator[int]:
    """The port of a server that answers whatever it reads with ``PAGE``."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with client:
                try:
                    client.recv(65536)
                    client.sendall(PAGE)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()


def test_a_producer_is_told_the_port_is_not_a_redis(not_redis: int) -> None:
    app = Minitask("notredis", broker=f"redis://127.0.0.1:{not_redis}/0")
    task = app.task(name="t")(lambda: None)
    try:
        with pytest.raises(BrokerError) as raised:
            task.delay()
    finally:
        app.close()
    said = str(raised.value)
    assert SAID in said and "host and port" in said, said
    assert "proto-max-bulk-len" not in said and "max_message_bytes" not in said, said


def test_a_worker_is_told_the_port_is_not_a_redis(not_redis: int, processes: Processes,
                                                  tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.basic", "--pool", "thread", log=log,
                              env={"MINITASK_BROKER_URL": f"redis://127.0.0.1:{not_redis}/0"})
    assert exit_code(worker) == 3
    said = log.read_text(errors="replace")
    assert SAID in said and "cannot start" in said, said
    assert "proto-max-bulk-len" not in said and "Traceback" not in said, said
