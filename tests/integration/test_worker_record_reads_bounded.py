"""A worker's record (its heartbeat hash) filled with data minitask did not write costs
``minitask status``, the dashboard's pages and ``/metrics`` the same as a clean one: only
the fields a worker writes are read (HMGET), each up to its bound (HSTRLEN first), never
the whole hash (it was: 1M planted fields made each status read 80 MB, 3.5 s)."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard
from minitask.stores.registry import RECORD_FIELDS, SHOWN_WORKERS
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
REGISTRY = AppKeys("foreign")
DEADLINE = 60.0
#: Fields planted in the live worker's record, and the size of a planted host.
PLANTED_FIELDS = 100_000
BIG = 5_000_000
#: What one status, three pages and a scrape may make Redis send, in all: a clean
#: record is a few kB; the planted ones were over 10 MB.
MOST_SENT = 1_000_000


@pytest.fixture
def app(app: Minitask) -> Minitask:
    """tests.apps.foreign on the suite's redis-server (emptied), its queue "other" known."""
    app.broker.queues.register_queues(["other"])
    return app


def sent_bytes(admin: "redis.Redis[bytes]") -> int:
    return int(admin.info("stats")["total_net_output_bytes"])


def test_planted_fields_and_a_huge_value_are_not_read_by_status_pages_or_scrapes(
        app: Minitask, admin: "redis.Redis[bytes]", processes: Processes,
        redis_server: RedisServer, tmp_path: Path) -> None:
    worker = processes.worker(APP, "-Q", "other", "--name", "real",
                              env={"MINITASK_BROKER_URL": redis_server.url},
                              log=tmp_path / "worker.log")
    wait_until(lambda: admin.zcard(REGISTRY.workers) == 1, timeout=DEADLINE,
               message="the worker's heartbeat")
    [member] = [raw.decode() for raw in admin.zrange(REGISTRY.workers, 0, -1)]
    pipe = admin.pipeline(transaction=False)
    for start in range(0, PLANTED_FIELDS, 10_000):
        pipe.hset(REGISTRY.worker(member),
                  mapping={f"junk{n}": "x" * 10 for n in range(start, start + 10_000)})
    pipe.execute()
    # and a record no worker renews, its host 5 MB, its running ids too long
    now_ms = int(time.time() * 1000)
    admin.zadd(REGISTRY.workers, {"planted": now_ms})
    admin.hset(REGISTRY.worker("planted"), mapping={
        "name": "planted", "beat_ms": now_ms, "host": b"h" * BIG, "running_ids": b"[" * BIG})

    before = sent_bytes(admin)
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "real" in said and "planted" in said, said
    dashboard = Dashboard(app)
    for path in ("/", "/workers", "/metrics"):
        status, _ = get(dashboard, path)
        assert status.startswith("200"), (path, status)
    sent = sent_bytes(admin) - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes for one status and three pages"
    assert admin.hlen(REGISTRY.worker(member)) > PLANTED_FIELDS  # nothing was deleted
    records = {info["name"]: info for info in app.broker.registry.live(now_ms, 60_000)}
    assert not any(field.startswith("junk") for field in records["real"])
    assert records["planted"]["host"] == "?" and records["planted"]["running_ids"] == "?"

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0


def test_a_timeout_message_reads_a_bounded_number_of_worker_records(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A ``get(timeout=...)`` that runs out names the live workers of the task's queue:
    it read every live member of the registry (20,000 planted: 20,000 records)."""
    now_ms = int(time.time() * 1000)
    for start in range(0, 20_000, 5000):
        admin.zadd(REGISTRY.workers, {f"planted{i}": now_ms for i in range(start, start + 5000)})
    handle = app.tasks["mark"].delay("never run")
    admin.config_resetstat()
    with pytest.raises(ResultTimeout, match="no live worker serves queue 'other'"):
        handle.get(timeout=0.1)
    stats = admin.info("commandstats")
    reads = sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
                for name in ("hgetall", "hmget", "exists", "hstrlen"))
    assert reads <= SHOWN_WORKERS * (len(RECORD_FIELDS) + 2) + 50, reads
