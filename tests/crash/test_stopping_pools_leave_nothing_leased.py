"""A worker stopped while tasks flow leaves none of them leased to itself: what it
leased and did not run is at once another worker's, not after its lease lapses."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("drain", "default")
#: Tasks put in the queue: many more than a few seconds' drain on a slow machine.
TASKS = 20_000


@pytest.fixture
def anoop(server: RedisServer) -> Iterator[Any]:
    """tests.apps.drain's ``anoop`` (a coroutine doing nothing), sent from the test."""
    import tests.apps.drain as drain
    app = Minitask("drain", broker=server.client())
    yield app.task(name=drain.anoop.name, ignore_result=True)(drain.anoop.func)
    app.close()


def _leased(client: "redis.Redis[bytes]") -> List[bytes]:
    return list(client.zrange(KEYS.leases, 0, -1))


@pytest.mark.parametrize("pool,grace", [
    ("asyncio", "30"), ("asyncio", "0"),
    # the thread pool's stopping threads give back at once what they leased: through
    # the client's pool, capped and half taken by the threads' own connections, some
    # were refused ("Too many connections") and stayed leased, in one run of three
    ("thread", "30")])
def test_a_worker_stopped_mid_drain_leaves_no_task_leased(
        processes: Processes, server: RedisServer, anoop: Any, pool: str,
        grace: str, tmp_path: Path) -> None:
    """Stopped (SIGTERM) three times while its slots hand tasks on to each other, with
    the default 30 s lease: each time, once it exited, nothing is leased any more."""
    for start in range(0, TASKS, 1000):
        anoop.delay_many([(n,) for n in range(start, start + 1000)])
    client = server.client()
    try:
        for round in range(3):
            left = client.hlen(KEYS.messages)
            log = tmp_path / f"worker-{round}.log"
            worker = processes.worker("tests.apps.drain", "--pool", pool, "-c", "50",
                                      "--grace", grace, "--loglevel", "INFO",
                                      env={"MINITASK_BROKER_URL": server.url}, log=log)
            wait_until(lambda: client.hlen(KEYS.messages) <= left - 300, timeout=DEADLINE,
                       interval=0.005, message="the worker to run 300 tasks")
            worker.send_signal(signal.SIGTERM)
            assert exit_code(worker) == 0
            leased = _leased(client)
            if leased:
                print(log.read_text(errors="replace")[-6000:])
            assert leased == [], (
                f"{len(leased)} task(s) still leased by a stopped worker, for the rest "
                f"of their lease: {[task_id.decode() for task_id in leased[:5]]}")
        assert client.hlen(KEYS.messages) > 0, "stopped while tasks were queued"
    finally:
        client.close()
