"""A grouped ready task whose flow spec cannot be read (fair queues, issue 35;
probe 9's M2): data minitask did not write, such as ``nan`` for its
``group_max_running``. It is never dropped: it leaves its group for the ready list of
its priority and runs as an ungrouped task with such a spec does (a spec that does
not parse is no limit), with a line in Redis's log naming the key, the field and the
problem; the group's other tasks, and other groups, run as before.

The script cases run on fakeredis and on the suite's own redis-server (``make_app``);
the last one runs a real worker process on a redis-server of its own (its log read).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import QueueKeys
from tests.apps import fair
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.fair import served, tenant_app
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

KEYS = QueueKeys("test", "default")
DEADLINE = 90.0

#: what is planted in place of a spec of group ``A``: each no grouped spec minitask
#: writes (``\n0\n0\n0\n0\n0\n1\n0\n0\nA`` for ``group_max_running=1``)
PLANTED = {
    "nan": "\n0\n0\n0\n0\n0\nnan\n0\n0\nA",
    "garbage": "x",
    "empty group": "\n0\n0\n0\n0\n0\n1\n0\n0\n",
    "ungrouped": "\n0\n0\n0\n0\n0\n",
    "missing": None,
}


def _group_keys(client: "redis.Redis[bytes]") -> List[str]:
    return sorted(key.decode() for key in client.keys("*")
                  if b":g:" in key or b"flow:groups" in key)


@pytest.mark.parametrize("planted", sorted(PLANTED))
@pytest.mark.parametrize("size", [1, 3])
def test_a_grouped_task_whose_spec_is_unreadable_runs_and_its_group_goes_on(
        make_app: Callable[..., Minitask], clock: ManualClock, planted: str,
        size: int) -> None:
    app, job = tenant_app(make_app)  # no limit: tasks served and never acked go on
    client = app.broker.transport.client
    handles = [job.delay("A", n) for n in range(size)]  # a group of one: held in its token
    job.delay_many([("B", n) for n in range(2)])
    if PLANTED[planted] is None:
        client.hdel(KEYS.flow, handles[0].id)
    else:
        client.hset(KEYS.flow, handles[0].id, PLANTED[planted])
    order = served(app, clock, 2 * size + 4)
    assert sorted(order) == sorted([f"A{n}" for n in range(size)] + ["B0", "B1"]), order
    assert order.count("A0") == 1
    # it left its group (counted there no more) for a ready list; the others kept theirs.
    # A group of one's claim says ':' (its spec was plain when sent, and a waiting task's
    # spec is not written again), so the planted spec is not read and A0 runs on its
    # group's turn (a '/' claim's is read: tests/crash/test_fair_solo_claims_of_both_forms.py)
    assert (order.index("A0") > order.index("B0")) == (size > 1), order


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_worker_runs_every_task_and_the_groups_leave_nothing(
        make_app: Callable[..., Minitask], clock: ManualClock, planted: str) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    client = app.broker.transport.client
    handles = [job.delay(tenant, n) for tenant in "AB" for n in range(3)]
    if PLANTED[planted] is None:
        client.hdel(KEYS.flow, handles[1].id)
    else:
        client.hset(KEYS.flow, handles[1].id, PLANTED[planted])
    assert drain(app.worker(burst=True)) == 6
    assert [handle.get(timeout=0) for handle in handles] == [0, 1, 2, 0, 1, 2]
    assert queue_counts(app, "default")["ready"] == 0
    assert _group_keys(client) == [] and client.hlen(KEYS.flow) == 0


def test_the_only_grouped_task_its_spec_gone_runs_with_flow_control_off(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app, group_max_running=1)
    client = app.broker.transport.client
    handle = job.delay("A", 5)
    client.hdel(KEYS.flow, handle.id)  # the flow hash is empty: the fetch meets the token
    assert drain(app.worker(burst=True)) == 1
    assert handle.get(timeout=0) == 5
    assert _group_keys(client) == [] and queue_counts(app, "default")["ready"] == 0


# ---- a real worker, a redis-server whose log the test reads ----------------------------

FAIR = QueueKeys("fair", "default")


@pytest.fixture
def logged_server(start_redis: Callable[..., RedisServer],
                  tmp_path: Path) -> Iterator[RedisServer]:
    log = tmp_path / "redis.log"
    server = start_redis("--logfile", str(log), "--loglevel", "warning")
    yield server


def test_planted_nan_on_a_real_worker_runs_the_task_and_says_so_in_redis_log(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    client = logged_server.client()
    app = Minitask("fair", broker=logged_server.client())
    for task in fair.app.tasks.values():
        grouping = task.options.grouping
        app.task(name=task.name, group_by=grouping.group_by,
                 group_max_running=grouping.max_running or None)(task.func)
    ordered = app.tasks["tests.apps.fair.ordered"]
    tenant_job = app.tasks["tests.apps.fair.tenant_job"]
    handles = {(group, n): ordered.delay(group, n) for group in "ABC" for n in range(3)}
    tenant_job.delay_many([(group, n) for group in "ABC" for n in range(3)])
    planted = []
    for n in range(3):
        task_id = handles["A", n].id
        spec = client.hget(FAIR.flow, task_id)
        assert spec is not None and spec.split(b"\n")[6] == b"1"
        client.hset(FAIR.flow, task_id, spec.replace(b"\n1\n", b"\nnan\n", 1))
        planted.append(task_id)
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.fair", "--pool", "thread", "-c", "2", "--loglevel",
                     "WARNING", env={"MINITASK_BROKER_URL": logged_server.url}, log=log)
    try:
        for handle in handles.values():
            assert handle.get(timeout=DEADLINE) is None
        wait_until(lambda: client.llen("fair:starts") == 9, timeout=DEADLINE,
                   message="the 9 tenant jobs to start")
        for group in "ABC":
            raw = client.lrange(f"fair:log:{group}", 0, -1)
            entries = [record.decode().split(":") for record in raw]
            assert sorted(int(e[1]) for e in entries if e[0] == "end") == [0, 1, 2]
            if group != "A":  # group_max_running=1 kept: each ends before the next starts
                assert [e[0] for e in entries] == ["start", "end"] * 3, entries
        wait_until(lambda: not _group_keys(client) and client.hlen(FAIR.flow) == 0,
                   timeout=DEADLINE, message="the groups' keys and specs to go")
        text = (tmp_path / "redis.log").read_text(errors="replace")
        for task_id in planted:
            assert (f"the flow spec of task {task_id} (field {task_id} of {FAIR.flow}) holds "
                    f"group_max_running nan (line 7), no count") in text, text[-3000:]
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
