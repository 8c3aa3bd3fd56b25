"""A full max_running or group_max_running set is checked a bounded sample at a time
(issue 29, section 3), on a real redis-server: ghost members planted in it (ids no
task holds a slot with) are freed, a fetch meeting 200,000 of them sends Redis about
as many commands as one meeting ten, and a ghost with a message of its own (not
leased, not waiting for a retry, in no ready list nor group ready set) no longer
holds its group's slot for ever."""
from __future__ import annotations

import time
from typing import Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys, queue_keys

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]

KEYS: QueueKeys = queue_keys("test", "default")
LIMITER_RUNNING = KEYS.flow_prefix + "7:limited:running"
GROUP_RUNNING = KEYS.fair_group("t1", "running")
#: Commands one fetch may send (scripts' calls included) meeting a full set, ghosts or not.
FETCH_COMMANDS_MOST = 3_000


def plant(admin: "redis.Redis[bytes]", key: str, count: int, messages: bool = False) -> None:
    """``count`` ghost members in the set ``key`` (with a junk message each, if asked)."""
    for first in range(0, count, 10_000):
        ids = [f"ghost-{n}" for n in range(first, min(first + 10_000, count))]
        admin.sadd(key, *ids)
        if messages:
            admin.hset(KEYS.messages, mapping={i: b"junk" for i in ids})


def commands_sent(admin: "redis.Redis[bytes]") -> Dict[str, int]:
    """Calls of each command since the last CONFIG RESETSTAT (a script's own included)."""
    stats = admin.info("commandstats")
    return {name: int(entry["calls"]) for name, entry in stats.items()}


def fetch_cost(app: Minitask, admin: "redis.Redis[bytes]") -> int:
    """Commands Redis ran for one fetch of the queue, and the fetch's calls and usec."""
    admin.config_resetstat()
    app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000, count=1,
                            max_deliveries=5)
    calls = commands_sent(admin)
    calls.pop("cmdstat_config|resetstat", None)
    calls.pop("cmdstat_config", None)
    return sum(calls.values())


def run_until(app: Minitask, ran: List[int], want: List[int], within: float = 30.0) -> None:
    """Fetch and run (one at a time, in this thread) until ``ran`` holds ``want``."""
    worker = app.worker(burst=True)
    deadline = time.monotonic() + within
    while sorted(ran) != want and time.monotonic() < deadline:
        worker.run_once()
    assert sorted(ran) == want


def test_a_fetch_meeting_200000_limiter_ghosts_costs_what_one_meeting_ten_does(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.task(max_running=1, name="limited")
    def limited(n: int) -> None:
        pass

    limited.delay(1)
    limited.delay(2)
    plant(admin, LIMITER_RUNNING, 10)
    few = fetch_cost(app, admin)  # frees the ten, leases the first task
    assert admin.zcard(KEYS.leases) == 1
    plant(admin, LIMITER_RUNNING, 200_000)
    many = fetch_cost(app, admin)
    assert many <= FETCH_COMMANDS_MOST and few <= FETCH_COMMANDS_MOST, (few, many)


def test_limiter_ghosts_are_freed_and_its_tasks_run(app: Minitask,
                                                    admin: "redis.Redis[bytes]") -> None:
    ran: List[int] = []

    @app.task(max_running=1, name="limited")
    def limited(n: int) -> None:
        ran.append(n)

    plant(admin, LIMITER_RUNNING, 1_000)
    limited.delay(1)
    limited.delay(2)
    run_until(app, ran, [1, 2])
    assert admin.scard(LIMITER_RUNNING) == 0


def test_a_fetch_meeting_200000_group_ghosts_with_messages_is_bounded(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.task(group_by="tenant", group_max_running=1, name="job")
    def job(tenant: str, n: int) -> None:
        pass

    plant(admin, GROUP_RUNNING, 200_000, messages=True)
    job.delay("t1", 1)
    assert fetch_cost(app, admin) <= FETCH_COMMANDS_MOST


@pytest.mark.parametrize("ghosts", [1, 300])
def test_a_ghost_with_a_message_holds_its_group_slot_no_longer(
        app: Minitask, admin: "redis.Redis[bytes]", ghosts: int) -> None:
    ran: List[int] = []

    @app.task(group_by="tenant", group_max_running=1, name="job")
    def job(tenant: str, n: int) -> None:
        ran.append(n)

    plant(admin, GROUP_RUNNING, ghosts, messages=True)
    job.delay("t1", 1)
    job.delay("t1", 2)
    run_until(app, ran, [1, 2])
    assert not admin.exists(GROUP_RUNNING)


def test_a_group_slot_holder_waiting_for_its_retry_keeps_its_slot(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """A holder whose retry waits in delayed still holds the slot: the group's next
    task waits for it (the group's order holds across retries)."""
    @app.task(group_by="tenant", group_max_running=1, name="job")
    def job(tenant: str, n: int) -> None:
        pass

    job.delay("t1", 1)
    now_ms = app.clock.now_ms()
    first = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=30_000, count=1,
                                    max_deliveries=5).deliveries[0]
    # its attempt failed: retried in an hour, holding its slot meanwhile
    admin.zrem(KEYS.leases, first.task_id)
    admin.zadd(KEYS.delayed, {first.task_id: (now_ms + 3_600_000) * 10 + 4})
    job.delay("t1", 2)
    again = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=30_000, count=1,
                                    max_deliveries=5)
    assert again.deliveries == []
    assert admin.smembers(GROUP_RUNNING) == {first.task_id.encode()}
