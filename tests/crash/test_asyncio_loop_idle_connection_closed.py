"""A real asyncio worker whose loop connections Redis closed while they were idle
(CLIENT KILL here; Redis's ``timeout`` or a proxy's does the same) takes new ones for
its next outcomes: the first round trip after used to be sent on the closed one, fail
though nothing had been sent, leave its outcomes to the recording threads and rest
the loop a second."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import Minitask
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
TASKS = 30


def loop_connections(admin: "redis.Redis[bytes]") -> List[Dict[str, Any]]:
    """The worker's loop's connections: RESP2, having sent ack_fetch.lua (EVALSHA);
    redis-py 8's blocking ones speak RESP3."""
    return [client for client in admin.client_list()
            if client.get("resp") == "2" and client.get("cmd") == "evalsha"]


def test_loop_connections_closed_while_idle_are_replaced_before_sending(
        processes: Processes, start_redis: Callable[..., RedisServer], tmp_path: Path) -> None:
    server = start_redis()
    admin = redis.Redis(host="127.0.0.1", port=server.port)
    if admin.client_info().get("resp") == "2":
        pytest.skip("this redis-py's clients speak RESP2: the loop's are not told apart")
    import tests.apps.aio as aio
    app = Minitask("aio", broker=server.url)
    nap = app.task(name=aio.nap.name)(aio.nap.func)
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.aio", "--pool", "asyncio", "-c", "2", "--loglevel", "debug",
                     env={"MINITASK_BROKER_URL": server.url}, log=log)
    try:
        for index in range(TASKS):  # one at a time: each success's round trip from the loop
            assert nap.delay(f"first{index}", 0.0).get(timeout=DEADLINE) == f"first{index}"
        deadline = time.monotonic() + DEADLINE
        while not loop_connections(admin):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        before = log.read_text().count("could not")
        for client in loop_connections(admin):  # idle: the worker waits for tasks
            admin.client_kill_filter(_id=client["id"])
        time.sleep(0.5)  # the loop sees them end
        for index in range(TASKS):
            assert nap.delay(f"then{index}", 0.0).get(timeout=DEADLINE) == f"then{index}"
        said = log.read_text()
    finally:
        admin.close()
        app.close()
    failed = [line for line in said.splitlines()[-200:] if "could not" in line]
    assert said.count("could not") == before, failed  # no round trip of the loop failed
