"""A ``max_running`` limiter's or a ``group_max_running`` group's ``running`` set
lost while a slot is held (issue 29, H2): replaced by another type (moved aside by
the outcome), deleted by an operator, or its holder's lease expired and the task
dead-lettered. Real worker processes on a real redis-server, on every pool: the
slot's release re-arms the waiting tasks, which run (before, they stayed queued
for good: the re-arm waited for an SREM that found nothing to remove).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask, TaskFailed
from minitask.broker.keys import AppKeys, QueueKeys
from tests.apps import lost_slots
from tests.support.processes import Processes, kill_group
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 60.0
APP = "tests.apps.lost_slots"
KEYS = QueueKeys("slots", "default")
LIMITED = "tests.apps.lost_slots.limited"
GROUPED = "tests.apps.lost_slots.grouped"


class Slots:
    """The test's side: the app's tasks on the suite's server, and its workers."""

    def __init__(self, server: RedisServer, processes: Processes, logs: Path,
                 admin: "redis.Redis[bytes]") -> None:
        self.server, self.processes, self.logs, self.admin = server, processes, logs, admin
        self.app = Minitask("slots", broker=server.client())
        self.limited = self.app.task(name=LIMITED, max_running=1)(lost_slots.limited.func)
        self.grouped = self.app.task(name=GROUPED, group_by="account",
                                     group_max_running=1)(lost_slots.grouped.func)
        self.started: List[Any] = []

    def worker(self, pool: str, **env: str) -> Any:
        log = self.logs / f"worker-{len(self.started)}.log"
        process = self.processes.worker(
            APP, "--pool", pool, "-c", "3",
            env={"MINITASK_BROKER_URL": self.server.url, **env}, log=log)
        self.started.append(process)
        wait_until(lambda: self.admin.zcard(AppKeys("slots").workers) >= 1,
                   timeout=DEADLINE, message="a worker to start")
        return process

    def send(self, kind: str) -> Tuple[List[Any], str]:
        """Three tasks sharing one slot, and the key of their running set."""
        if kind == "limited":
            handles = [self.limited.delay(f"t{n}") for n in range(3)]
            return handles, f"{KEYS.flow_prefix}{len(LIMITED)}:{LIMITED}:running"
        handles = [self.grouped.delay("A", f"t{n}") for n in range(3)]
        return handles, KEYS.fair_group("A", "running")

    def log(self) -> List[str]:
        return [raw.decode() for raw in self.admin.lrange("slots:log", 0, -1)]

    def first_holds(self, kind: str, key: str) -> None:
        """Wait until one task holds the slot and the others wait for it: parked by
        their limiter, or their group out of the rotation (no token)."""
        wait_until(lambda: self.log(), timeout=DEADLINE, message="the first task to start")
        if kind == "limited":
            park = key[:-len("running")] + "park"
            limiter = f"{len(LIMITED)}:{LIMITED}"
            wait_until(lambda: self.admin.llen(park) == 2
                       and self.admin.zscore(KEYS.flow_due, limiter) is None,
                       timeout=DEADLINE, message="the other two tasks to wait for a slot")
        else:
            turn = KEYS.fair_group("A", "turn")
            wait_until(lambda: self.admin.hget(turn, "tok") is None, timeout=DEADLINE,
                       message="the group to leave the rotation")
        assert len(self.log()) == 1, self.log()
        assert self.admin.type(key) == b"set" and self.admin.scard(key) == 1

    def print_logs(self) -> None:
        for index in range(len(self.started)):
            path = self.logs / f"worker-{index}.log"
            print(f"----- {path}\n{path.read_text(errors='replace')[-4000:]}")


@pytest.fixture
def slots(redis_server: RedisServer, processes: Processes, tmp_path: Path,
          admin: "redis.Redis[bytes]", request: pytest.FixtureRequest) -> Iterator[Slots]:
    made = Slots(redis_server, processes, tmp_path, admin)
    try:
        yield made
    finally:
        made.app.close()
        if did_fail(request):
            made.print_logs()


def _replaced(admin: "redis.Redis[bytes]", key: str) -> None:
    admin.delete(key)
    admin.set(key, "someone else's")


def _deleted(admin: "redis.Redis[bytes]", key: str) -> None:
    admin.delete(key)


LOSSES: Dict[str, Callable[["redis.Redis[bytes]", str], None]] = {
    "replaced": _replaced, "deleted": _deleted}


@pytest.mark.parametrize("kind", ["limited", "grouped"])
@pytest.mark.parametrize("pool,loss", [("thread", "replaced"), ("asyncio", "replaced"),
                                       ("process", "replaced"), ("thread", "deleted")])
def test_a_running_set_lost_while_its_slot_is_held_leaves_no_task_waiting(
        slots: Slots, kind: str, pool: str, loss: str) -> None:
    worker = slots.worker(pool)
    handles, key = slots.send(kind)
    slots.first_holds(kind, key)
    LOSSES[loss](slots.admin, key)
    slots.admin.set("slots:go", "1")  # the slot frees
    for n, handle in enumerate(handles):
        assert handle.get(timeout=DEADLINE) == f"t{n}"
    assert sorted(slots.log()) == sorted([f"start:t{n}" for n in range(3)]
                                         + [f"end:t{n}" for n in range(3)])
    if loss == "replaced":
        assert slots.admin.get(key + ":foreign") == b"someone else's"
    assert worker.poll() is None


@pytest.mark.parametrize("kind", ["limited", "grouped"])
def test_a_running_set_deleted_under_a_killed_worker_leaves_no_task_waiting(
        slots: Slots, kind: str) -> None:
    # the holder's worker is killed; its lease expires on the last delivery allowed, and
    # the next worker dead-letters the task: that outcome re-arms the others
    first = slots.worker("thread", TEST_VISIBILITY="2", TEST_MAX_DELIVERIES="1")
    handles, key = slots.send(kind)
    slots.first_holds(kind, key)
    slots.admin.delete(key)
    kill_group(first)
    slots.admin.zremrangebyrank(AppKeys("slots").workers, 0, -1)
    slots.admin.set("slots:go", "1")
    slots.worker("thread", TEST_VISIBILITY="2", TEST_MAX_DELIVERIES="1")
    held = next(n for n, handle in enumerate(handles)
                if slots.log()[0] == f"start:t{n}")
    with pytest.raises(TaskFailed):
        handles[held].get(timeout=DEADLINE)
    for n, handle in enumerate(handles):
        if n != held:
            assert handle.get(timeout=DEADLINE) == f"t{n}"


def test_a_group_resumed_over_a_flow_due_of_another_type_comes_back(slots: Slots) -> None:
    # the resume's re-arm is its flow_due entry: a flow_due of another type took none,
    # silently, and the group's tasks stayed queued for good
    slots.worker("thread")
    slots.admin.set("slots:go", "1")
    slots.app.pause_group("default", "A")
    handles, _ = slots.send("grouped")
    turn = KEYS.fair_group("A", "turn")
    wait_until(lambda: slots.admin.hget(turn, "tok") is None, timeout=DEADLINE,
               message="the paused group to leave the rotation")
    assert slots.log() == []
    slots.admin.delete(KEYS.flow_due)
    slots.admin.set(KEYS.flow_due, "someone else's")
    assert slots.app.resume_group("default", "A") is True
    for n, handle in enumerate(handles):
        assert handle.get(timeout=DEADLINE) == f"t{n}"
    assert slots.admin.get(KEYS.flow_due + ":foreign") == b"someone else's"


@pytest.mark.parametrize("kind", ["limiter", "group"])
def test_a_flow_due_of_another_type_under_parked_tasks_is_moved_aside_and_they_run(
        slots: Slots, kind: str) -> None:
    # a task held by a rate until its turn (10 s at 6/m: its limiter's or its group's)
    # has its due time in flow_due: replaced by another type, no fetch read it and no
    # outcome re-armed the limiter or group, so the task stayed queued for good. The
    # heartbeat moves it aside and makes every waiting limiter and group due again
    if kind == "limiter":
        name = "tests.apps.lost_slots.paced"
        paced = slots.app.task(name=name, rate_limit="6/m")(lost_slots.paced.func)
        limiter = f"{len(name)}:{name}"
        send: Callable[[str], Any] = paced.delay
    else:
        rated = slots.app.task(name="tests.apps.lost_slots.rated", group_by="account",
                               group_rate_limit="6/m")(lost_slots.rated.func)
        limiter = "g:R"

        def send(tag: str) -> Any:
            return rated.delay("R", tag)
    slots.worker("thread")
    slots.admin.set("slots:go", "1")
    first, second = send("t0"), send("t1")
    assert first.get(timeout=DEADLINE) == "t0"
    wait_until(lambda: slots.admin.zscore(KEYS.flow_due, limiter) is not None,
               timeout=DEADLINE, message="the second task to be parked until its turn")
    slots.admin.delete(KEYS.flow_due)
    slots.admin.set(KEYS.flow_due, "someone else's")
    assert second.get(timeout=DEADLINE) == "t1"
    assert slots.admin.get(KEYS.flow_due + ":foreign") == b"someone else's"
