"""``minitask bench --broker URL`` stopped by SIGTERM stops its workers and deletes its
keys, as Ctrl-C does: the workers run in sessions of their own, and SIGTERM's default
ended the bench alone, leaving them serving the user's Redis for good (issue 29,
probe35 M2). A real redis-server of the test's own: every client but the test's is
the bench's."""
from __future__ import annotations

import signal
import time
from typing import Callable

import pytest

from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def others(client: "object") -> int:
    """The clients connected besides the asking one."""
    return len(client.client_list()) - 1  # type: ignore[attr-defined]


def test_sigterm_ends_the_bench_with_its_workers(start_redis: Callable[..., RedisServer],
                                                 processes: Processes) -> None:
    # a server of its own: the suite's shared one holds other tests' idle clients
    redis_server = start_redis()
    client = redis_server.client(db=4)
    bench = processes.start("-m", "minitask", "bench", "--broker",
                            f"redis://127.0.0.1:{redis_server.port}/4", "--tasks", "2000",
                            "--memory-tasks", "100")
    registry = f"minitask:{{minitask-bench-{bench.pid}}}:workers"
    deadline = time.monotonic() + 120
    while not client.zcard(registry) and time.monotonic() < deadline:  # a worker beat
        assert bench.poll() is None, "the bench ended before a worker started"
        time.sleep(0.05)
    assert client.zcard(registry), "no bench worker started within 120 s"

    bench.send_signal(signal.SIGTERM)
    assert exit_code(bench) != 0

    deadline = time.monotonic() + 60
    while others(client) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert others(client) == 0, [{field: found[field] for field in ("name", "cmd", "age")}
                                 for found in client.client_list()]
    assert client.dbsize() == 0, client.keys("*")[:10]
    client.close()
