"""What the tests of slot holders whose flow specs are lost share
(tests/integration/test_lost_holder_specs_free_their_slots.py and
test_parked_tasks_run_after_holder_specs_lost.py): the app ``tests.apps.lost_slots``
(its tasks hold a ``max_running`` or ``group_max_running`` slot until ``slots:go``
exists) seen from the test, its worker processes on the test's redis-server, and the
plants that lose a holder's spec while it runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps import lost_slots
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer

KEYS = QueueKeys("slots", "default")
LIMITED = "tests.apps.lost_slots.limited"
GROUPED = "tests.apps.lost_slots.grouped"
LIMITER = f"{len(LIMITED)}:{LIMITED}"
#: The limiter's list of the tasks parked for its slot.
PARK = f"{KEYS.flow_prefix}{LIMITER}:park"

#: A change to Redis made while the holder (its task id the second argument) runs.
Plant = Callable[["redis.Redis[bytes]", str], Any]


def spec_set(value: Any) -> Plant:
    """The plant that overwrites the holder's spec with ``value``."""
    return lambda client, holder: client.hset(KEYS.flow, holder, value)


#: The plants both tests make: the whole flow hash lost, or the holder's field.
LOST: Dict[str, Plant] = {
    "flow deleted": lambda client, holder: client.delete(KEYS.flow),
    "its spec deleted": lambda client, holder: client.hdel(KEYS.flow, holder),
}


class Held:
    """The test's side: the app's tasks on the test's server, its workers (each logging
    to ``worker-<n>.log`` under ``logs``), and the tasks' own log."""

    def __init__(self, server: RedisServer, processes: Processes, logs: Path) -> None:
        self.server, self.processes, self.logs = server, processes, logs
        self.client = server.client()
        self.app = Minitask("slots", broker=server.client())
        self.limited = self.app.task(name=LIMITED, max_running=1)(lost_slots.limited.func)
        self.grouped = self.app.task(name=GROUPED, group_by="account",
                                     group_max_running=1)(lost_slots.grouped.func)
        self.workers = 0

    def worker(self, pool: str) -> Any:
        self.workers += 1
        return self.processes.worker(
            "tests.apps.lost_slots", "--pool", pool, "-c", "4", "--loglevel", "WARNING",
            env={"MINITASK_BROKER_URL": self.server.url},
            log=self.logs / f"worker-{self.workers}.log")

    def log(self) -> List[str]:
        """The tasks' ``start:<tag>`` and ``end:<tag>``, in order."""
        return [raw.decode() for raw in self.client.lrange("slots:log", 0, -1)]


def held_for(made: Held, request: pytest.FixtureRequest) -> Iterator[Held]:
    """A fixture's body: ``made``, then its workers killed and its clients closed; the
    tail of each worker's log printed when the test failed."""
    try:
        yield made
    finally:
        if did_fail(request):
            for log in sorted(made.logs.glob("worker-*.log")):
                print(f"----- {log}\n{log.read_text(errors='replace')[-4000:]}")
        made.processes.kill_all()
        made.app.close()
        made.client.close()
