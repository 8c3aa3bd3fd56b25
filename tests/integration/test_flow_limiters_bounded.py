"""Flow limiters leave nothing behind when idle, and counting parked tasks costs
the same whatever the number of limit keys ever used (a real redis-server, whose
commandstats count what each read costs)."""
from __future__ import annotations

import io
from typing import Any, Dict, Iterator

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_server: Any) -> Iterator["redis.Redis[bytes]"]:
    made = redis_server.client()
    made.flushall()
    try:
        yield made
    finally:
        made.close()


def _commands(client: "redis.Redis[bytes]", read: Any) -> Dict[str, int]:
    """The commands Redis ran for ``read()``, by name."""
    client.config_resetstat()
    read()
    stats = client.info("commandstats")
    return {name: int(stat["calls"]) for name, stat in stats.items()
            if name not in ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_config")}


def _reads(app: Minitask) -> None:
    queue_counts(app, "default")  # minitask status
    dashboard = Dashboard(app)
    for path in ("/", "/metrics"):
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
                   "wsgi.input": io.BytesIO(b""), "HTTP_HOST": "127.0.0.1:5555"}
        b"".join(dashboard(environ, lambda status, headers: None))


def _app(redis_server: Any, keys: int) -> Minitask:
    app = Minitask("bounded", broker=redis_server.url)

    @app.task(max_running=1, name="per_tenant")
    def per_tenant(n: int) -> int:
        return n

    for n in range(keys):  # (a batch block refuses calls with flow options)
        per_tenant.apply_async((n,), limit_key=f"tenant-{n}")
    return app


def test_status_queue_page_and_scrape_cost_the_same_with_10_or_50000_limit_keys(
        redis_server: Any, client: "redis.Redis[bytes]") -> None:
    few = _app(redis_server, 10)
    try:
        _reads(few)  # the scripts loaded and the clock read first: a call each, once
        cost_few = _commands(client, lambda: _reads(few))
    finally:
        few.close()
    client.flushall()
    many = _app(redis_server, 50_000)
    try:
        assert queue_counts(many, "default")["ready"] == 50_000
        _reads(many)  # (as for the few: its clock's first read of Redis's TIME, once)
        cost_many = _commands(client, lambda: _reads(many))
    finally:
        many.close()
    assert cost_many == cost_few
    # 60 of them: the queue page's hour of throughput, and as many HSTRLEN before the
    # read of its fields (values longer than minitask writes are left unread): in two
    # round trips, whatever the number of limit keys
    assert sum(cost_many.values()) < 250


def test_a_limiter_is_named_while_it_parks_tasks_and_forgotten_once_idle(
        redis_server: Any, client: "redis.Redis[bytes]") -> None:
    app = Minitask("bounded", broker=redis_server.url)

    @app.task(max_running=1, name="per_tenant")
    def per_tenant(n: int) -> int:
        return n

    try:
        for round_ in range(2):  # the first of each tenant runs, the second is parked
            for n in range(50):
                per_tenant.apply_async((round_,), limit_key=f"tenant-{n}")
        keys = queue_keys("bounded", "default")
        assert not client.exists(keys.flow_limiters)  # an enqueue names no limiter
        first = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=60_000,
                                        count=100, max_deliveries=5)
        assert len(first.deliveries) == 50
        counts = queue_counts(app, "default")
        assert counts["parked"] == 50 and counts["ready"] == 50
        assert client.scard(keys.flow_limiters) == 50
        for delivery in first.deliveries:
            app.broker.results.ack("default", delivery.task_id, None, 0)
        worker = app.worker()
        for _ in range(200):
            if not worker.run_once():
                break
        counts = queue_counts(app, "default")
        assert counts["ready"] == 0 and "parked" not in counts
        # idle: no limiter named, no limiter key left but the rate-free ones' none
        assert not client.exists(keys.flow_limiters)
        assert int(client.get(keys.flow_parked) or 0) == 0
        assert list(client.scan_iter(match=keys.flow_prefix + "*", count=1000)) == []
    finally:
        app.close()
