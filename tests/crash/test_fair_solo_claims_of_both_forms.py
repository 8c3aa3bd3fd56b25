"""Fair queues: a solo group's claim says whether its task's spec is plain
(docs/reference/keys.rst). A plain grouped task sent to a group with no keys gets a
claim of ``<now>.<count>:`` and its task, and a fetch leases it without reading its
spec; any other solo claim (flow.lua's join(), or every one a queue holds that was
written before the ``:`` form existed) says ``/``, and its task's spec is read.

The upgrade path: a queue written in the ``/`` form (the new form's bytes with
``/`` in place of ``:``, which is what the send wrote before) is drained by real
worker processes of this version, a second task joining one of its solo groups and
a cancel of another's task included, and leaves nothing of its groups behind.
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
from tests.support.fair import served, tenant_app
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

DEADLINE = 120.0
KEYS = QueueKeys("fair", "default")


def _commands(client: "redis.Redis[bytes]") -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[8:]: int(stat["calls"]) for name, stat in stats.items()
            if name.startswith("cmdstat_")}


def _claim(client: "redis.Redis[bytes]", group: str) -> bytes:
    return client.hget(KEYS.fair_group(group, "turn"), "tok") or b""


def _as_written_before(client: "redis.Redis[bytes]", group: str,
                       keys: QueueKeys = KEYS) -> None:
    """Rewrite a solo group's claim and token from the ``:`` form to ``/``: the bytes
    the send wrote before the ``:`` form existed."""
    turn = keys.fair_group(group, "turn")
    new = client.hget(turn, "tok") or b""
    assert b".1:" in new, new
    old = new.replace(b".1:", b".1/", 1)
    token, old_token = b"\xff" + new + b"\xff" + group.encode(), b"\xff" + old + b"\xff" + \
        group.encode()
    ready = keys.ready[9 - int(new.split(b":", 1)[1][:1])]
    with client.pipeline() as pipe:
        pipe.hset(turn, "tok", old)
        pipe.lset(ready, client.lpos(ready, token), old_token)
        pipe.zadd(keys.cancelled, {old_token: client.zscore(keys.cancelled, token)})
        pipe.zrem(keys.cancelled, token)
        pipe.execute()
    assert client.hget(turn, "tok") == old


def _group_keys(client: "redis.Redis[bytes]") -> List[str]:
    return sorted(key.decode() for key in client.keys("*{fair:default}*")
                  if b":g:" in key or b"groups" in key or key.endswith(b":cancelled"))


@pytest.mark.integration
def test_a_plain_solo_task_is_fetched_without_its_spec_read_and_an_old_claim_with_it(
        redis_server: RedisServer, clock: ManualClock) -> None:
    client = redis_server.client()
    client.flushall()
    app = Minitask("fair", broker=redis_server.client(), clock=clock)

    @app.task(group_by="tenant", name="job", ignore_result=True)
    def job(tenant: str, n: int) -> None:
        pass

    try:
        per_form = {}
        for form in ("new", "old"):
            job.delay_many([(f"{form}{n}", n) for n in range(10)])
            if form == "old":
                for n in range(10):
                    _as_written_before(client, f"old{n}")
            before = _commands(client)
            got = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                          count=10, max_deliveries=5)
            after = _commands(client)
            assert sorted(d.message().args[0] for d in got.deliveries) == sorted(
                f"{form}{n}" for n in range(10))
            per_form[form] = after.get("hget", 0) - before.get("hget", 0)
        # each task's message, its claim; and in the old form, its spec
        assert per_form == {"new": 20, "old": 30}
        assert _group_keys(client) == []
    finally:
        app.close()


@pytest.mark.parametrize("form", ["new", "old"])
def test_a_spec_planted_under_a_solo_task_is_read_by_an_old_claim_only(
        make_app: Callable[..., Minitask], clock: ManualClock, form: str) -> None:
    # an old claim ('/') has its task's spec read: one that cannot be read sends the
    # task out of its group, to the ready list, behind B's (its log line said); a new
    # claim (':') names a task whose spec was plain and is not written again while it
    # waits, so a spec planted there is not read: the task runs on its group's turn,
    # and the planted spec goes with its ack. Either way it runs once, and its group
    # goes on (tests/integration/test_fair_unreadable_spec.py: the other cases)
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    handle = job.delay("A", 0)
    job.delay_many([("B", n) for n in range(2)])
    if form == "old":
        _as_written_before(client, "A", QueueKeys("test", "default"))
    client.hset(QueueKeys("test", "default").flow, handle.id, "x")
    order = served(app, clock, 6)
    assert sorted(order) == ["A0", "B0", "B1"]
    assert (order.index("A0") > order.index("B0")) == (form == "old")


@pytest.fixture
def old_queue(redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
              tmp_path: Path) -> Iterator[Any]:
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
def test_a_worker_drains_a_queue_whose_solo_groups_were_written_in_the_old_form(
        old_queue: Any) -> None:
    app, client, worker = old_queue
    job = app.tasks["tests.apps.fair.tenant_job"]
    job.delay_many([(f"S{n}", 0) for n in range(30)] + [("J", 0)])
    doomed = job.delay("C", 0)
    for group in [f"S{n}" for n in range(30)] + ["J", "C"]:
        _as_written_before(client, group)
    job.delay("J", 1)  # joins an old-form solo group: its task goes to the set first
    assert client.zcard(KEYS.fair_group("J", "ready")) == 2
    assert doomed.cancel()  # an old-form claim's task taken out of its group
    assert not client.exists(KEYS.fair_group("C", "turn"))
    worker()

    def starts() -> List[str]:
        return [raw.decode() for raw in client.lrange("fair:starts", 0, -1)]

    wait_until(lambda: len(starts()) >= 32, timeout=DEADLINE,
               message="the 32 tasks of the old-form groups to start")
    wait_until(lambda: _group_keys(client) == [] and not client.zcard(KEYS.leases),
               timeout=DEADLINE, message="the groups' keys to go")
    got = starts()
    assert sorted(got) == sorted([f"S{n}:0" for n in range(30)] + ["J:0", "J:1"])
    assert got.index("J:0") < got.index("J:1")  # (one slot: they start as fetched)
