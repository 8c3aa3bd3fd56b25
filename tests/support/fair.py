"""Fair-queue test helpers: an app with one grouped task, the order fetches serve, and
the keys of a queue's groups; for planted solo-group claims, a redis-server logging its
warnings, the starts tests/apps/fair*.py record, and a run of tests/apps/fair_claims.py
on a real worker process."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import FetchResult
from tests.apps import fair_claims
from tests.support.clock import ManualClock
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

#: The queue of tests/apps/fair_claims.py.
CLAIMS = QueueKeys("claims", "default")
#: Bound on a wait for a worker process's tasks (s), on a loaded machine.
CLAIMS_DEADLINE = 60.0


def fetch(app: Minitask, clock: ManualClock, count: int = 1,
          lease_ms: int = 30_000) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=lease_ms,
                                   count=count, max_deliveries=5)


def served(app: Minitask, clock: ManualClock, fetches: int, count: int = 1) -> List[str]:
    """``<group><n>`` of each task handed out by ``fetches`` fetches (never acked)."""
    order = []
    for _ in range(fetches):
        for delivery in fetch(app, clock, count).deliveries:
            args = delivery.message().args
            order.append(f"{args[0]}{args[1]}")
    return order


def tenant_app(make_app: Callable[..., Minitask], **options: Any) -> Any:
    """An app and its task ``job(tenant, n)``, grouped by tenant."""
    app = make_app()

    @app.task(group_by="tenant", name="job", **options)
    def job(tenant: str, n: int) -> int:
        return n

    return app, job


def group_keys(client: "redis.Redis[bytes]", pattern: str = "*") -> List[str]:
    """The keys of the queue's groups and their bookkeeping that exist (among the keys
    ``pattern`` matches)."""
    return sorted(key.decode() for key in client.keys(pattern)
                  if b":g:" in key or b"groups" in key or key.endswith(b":cancelled"))


@pytest.fixture(name="logged_server")
def warnings_logged_server(start_redis: Callable[..., RedisServer],
                           tmp_path: Path) -> Iterator[RedisServer]:
    """The test's own redis-server, its warnings in ``tmp_path / "redis.log"``."""
    yield start_redis("--logfile", str(tmp_path / "redis.log"), "--loglevel", "warning")


def starts(client: "redis.Redis[bytes]", app: str = "claims") -> List[str]:
    """The ``<group>:<n>`` of each task of tests/apps/fair*.py's ``app`` started, in order."""
    return [raw.decode() for raw in client.lrange(f"{app}:starts", 0, -1)]


def claims_drained(client: "redis.Redis[bytes]") -> bool:
    """No task of tests/apps/fair_claims.py's queue waits or runs, no claim or spec left."""
    return not client.exists(CLAIMS.messages, CLAIMS.delayed, CLAIMS.leases,
                             CLAIMS.groups_solo, CLAIMS.flow)


@contextlib.contextmanager
def claims_run(server: RedisServer, processes: Processes, request: pytest.FixtureRequest,
               log: Path, *tasks: Any) -> Iterator[Tuple[Minitask, "redis.Redis[bytes]"]]:
    """A producer of tests/apps/fair_claims.py's ``tasks`` on ``server`` and a client of
    it; after, the worker processes killed (their log ``log`` printed if the test
    failed)."""
    client = server.client()
    app = Minitask("claims", broker=server.client())
    for task in tasks:
        app.task(name=task.name, group_by="tenant")(task.func)
    try:
        yield app, client
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()


def serve_claims(server: RedisServer, processes: Processes, log: Path, pool: str) -> None:
    """A worker process of tests/apps/fair_claims.py on ``pool``, two slots."""
    processes.worker("tests.apps.fair_claims", "--pool", pool, "-c", "2", "--loglevel",
                     "WARNING", env={"MINITASK_BROKER_URL": server.url}, log=log)


def run_to_the_end(client: "redis.Redis[bytes]", expected: Iterable[str],
                   started: str) -> None:
    """Wait until the ``expected`` tasks started (``started`` says which) and every task
    of tests/apps/fair_claims.py's queue ended, its claim and spec gone."""
    wanted = set(expected)
    wait_until(lambda: wanted <= set(starts(client)), timeout=CLAIMS_DEADLINE,
               message=f"{started} to start")
    wait_until(lambda: claims_drained(client), timeout=CLAIMS_DEADLINE,
               message="every task to end and its claim and spec to go")


def group_goes_on(app: Minitask, client: "redis.Redis[bytes]", group: str = "G") -> None:
    """A task sent to ``group`` afterwards (``<group>:9``) starts too."""
    app.tasks[fair_claims.job.name].delay(group, 9)
    wait_until(lambda: f"{group}:9" in starts(client), timeout=CLAIMS_DEADLINE,
               message=f"a later task of group {group} to start")
