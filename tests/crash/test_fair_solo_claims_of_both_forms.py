"""Fair queues: a solo group's claim says whether its task's spec is plain
(docs/reference/keys.rst): ``<now>.1:`` and its task, kept in the queue's
``groups_solo`` only and leased by a fetch without its spec read; any other solo claim
says ``/`` (kept in the group's turn), and its task's spec is read.

The send writes ``:`` for a plain spec (lib.lua's PLAIN_SOLO_CLAIM) and ``/`` for any
other, here a task with an expiry
(tests/integration/test_fair_solo_claims_written.py). Real worker processes drain a
queue of claims of both forms, a second task joining one solo group of each form and a
cancel of a task under each form included, and leave nothing of its groups behind.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps import fair
from tests.support.clock import ManualClock
from tests.support.fair import group_keys, served, tenant_app
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

DEADLINE = 120.0
KEYS = QueueKeys("fair", "default")
#: the pattern of this queue's keys
OWN = "*{fair:default}*"


def _commands(client: "redis.Redis[bytes]") -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[8:]: int(stat["calls"]) for name, stat in stats.items()
            if name.startswith("cmdstat_")}


def _claim(client: "redis.Redis[bytes]", group: str, keys: QueueKeys = KEYS) -> bytes:
    """A solo group's claim: in groups_solo (':'), or in its turn ('/')."""
    return (client.hget(keys.groups_solo, group)
            or client.hget(keys.fair_group(group, "turn"), "tok") or b"")


@pytest.mark.integration
def test_a_plain_claims_task_is_fetched_without_its_spec_read_and_a_slash_claims_with_it(
        redis_server: RedisServer, clock: ManualClock) -> None:
    client = redis_server.client()
    client.flushall()
    app = Minitask("fair", broker=redis_server.client(), clock=clock)

    @app.task(group_by="tenant", name="job", ignore_result=True)
    def job(tenant: str, n: int) -> None:
        pass

    try:
        per_form = {}
        for form in ("plain", "slash"):
            if form == "plain":
                job.delay_many([(f"{form}{n}", n) for n in range(10)])
            else:  # a spec with an expiry: a '/' claim
                for n in range(10):
                    job.apply_async((f"{form}{n}", n), expires=3600)
            assert all((b":" if form == "plain" else b"/") in _claim(client, f"{form}{n}")
                       for n in range(10))
            before = _commands(client)
            got = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                          count=10, max_deliveries=5)
            after = _commands(client)
            assert sorted(d.message().args[0] for d in got.deliveries) == sorted(
                f"{form}{n}" for n in range(10))
            per_form[form] = after.get("hget", 0) - before.get("hget", 0)
        # each task's message, its claim; and under a "/" claim, its spec
        assert per_form["plain"] == 20 and per_form["slash"] >= 30, per_form
        assert group_keys(client, OWN) == []
    finally:
        app.close()


@pytest.mark.parametrize("form", ["plain", "slash"])
def test_a_spec_planted_under_a_solo_task_is_read_by_a_slash_claim_only(
        make_app: Callable[..., Minitask], clock: ManualClock, form: str) -> None:
    # a '/' claim (a spec with an expiry) has its task's spec read: one that cannot
    # be read sends the task out of its group, to the ready list, behind B's (its log
    # line said); a ':' claim (what the send writes for a plain spec)
    # names a task whose spec was plain and is not written again while it waits, so a
    # spec planted there is not read: the task runs on its group's turn, and the
    # planted spec goes with its ack. Either way it runs once, and its group
    # goes on (tests/integration/test_fair_unreadable_spec.py: the other cases)
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    handle = job.delay("A", 0) if form == "plain" else job.apply_async(("A", 0), expires=3600)
    job.delay_many([("B", n) for n in range(2)])
    assert (b"/" if form == "slash" else b":") in _claim(client, "A", QueueKeys("test", "default"))
    client.hset(QueueKeys("test", "default").flow, handle.id, "x")
    order = served(app, clock, 6)
    assert sorted(order) == ["A0", "B0", "B1"]
    assert (order.index("A0") > order.index("B0")) == (form == "slash")


@pytest.fixture
def plain_queue(redis_server: RedisServer, admin: "redis.Redis[bytes]",
                processes: Processes, tmp_path: Path) -> Iterator[Any]:
    app = Minitask("fair", broker=redis_server.client())
    app.task(name="tests.apps.fair.tenant_job", group_by="tenant")(fair.tenant_job.func)

    def worker() -> None:
        processes.worker("tests.apps.fair", "--pool", "thread", "--loglevel", "WARNING",
                         "-c", "1", env={"MINITASK_BROKER_URL": redis_server.url},
                         log=tmp_path / "worker.log")

    try:
        yield app, admin, worker
    finally:
        processes.kill_all()
        app.close()
        if (tmp_path / "worker.log").exists():
            print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])


@pytest.mark.integration
@pytest.mark.crash
def test_a_worker_drains_a_queue_whose_solo_groups_have_claims_of_both_forms(
        plain_queue: Any) -> None:
    app, client, worker = plain_queue
    job = app.tasks["tests.apps.fair.tenant_job"]
    for n in range(30):  # every other one with an expiry: a '/' claim
        if n % 2:
            job.delay(f"S{n}", 0)
        else:
            job.apply_async((f"S{n}", 0), expires=3600)
    job.delay("J", 0)
    job.apply_async(("K", 0), expires=3600)
    doomed = [job.delay("C", 0), job.apply_async(("D", 0), expires=3600)]
    assert all(b".1:" in _claim(client, group) for group in ("S1", "J", "C"))
    assert all(b"/" in _claim(client, group) for group in ("S0", "K", "D"))
    job.delay("J", 1)  # joins a ':' solo group: its task goes to the set first
    job.delay("K", 1)  # joins a '/' one
    assert client.zcard(KEYS.fair_group("J", "ready")) == 2
    assert client.zcard(KEYS.fair_group("K", "ready")) == 2
    for handle, group in zip(doomed, "CD"):  # a claim's task taken out of its group
        assert handle.cancel()
        assert not _claim(client, group)
    worker()

    def starts() -> List[str]:
        return [raw.decode() for raw in client.lrange("fair:starts", 0, -1)]

    wait_until(lambda: len(starts()) >= 34, timeout=DEADLINE,
               message="the 34 tasks of the solo groups to start")
    wait_until(lambda: group_keys(client, OWN) == [] and not client.zcard(KEYS.leases),
               timeout=DEADLINE, message="the groups' keys to go")
    got = starts()
    assert sorted(got) == sorted([f"S{n}:0" for n in range(30)]
                                 + ["J:0", "J:1", "K:0", "K:1"])
    # (one slot: they start as fetched)
    assert got.index("J:0") < got.index("J:1") and got.index("K:0") < got.index("K:1")
