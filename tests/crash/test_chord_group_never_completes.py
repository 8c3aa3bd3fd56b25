"""A chord whose group can never complete (a fired mark no minitask wrote, planted while
its members run) ends its body, naming the group, on every pool: the body stayed
"unknown" for ever and nothing was logged."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask import TaskFailed, chain, chord
from minitask.broker.keys import queue_keys
from tests.apps.canvas import producer
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_planted_fired_mark_ends_the_chord_body(
        processes: Processes, server: RedisServer, pool: str, tmp_path: Any) -> None:
    processes.worker("tests.apps.canvas", "--pool", pool, "-c", "2",
                     env={"MINITASK_BROKER_URL": server.url}, log=tmp_path / "worker.log")
    app = producer(server.url)
    client: "redis.Redis[bytes]" = server.client()
    try:
        member, total = app.tasks["canvas.member"], app.tasks["canvas.total"]
        handle = chord([member.s("a", 1, pause=1.0), member.s("b", 2, pause=1.0)],
                       total.s()).delay()
        [group] = [key for key in client.keys("minitask:{canvas:*}:group:*")
                   if not key.endswith(b":results")]
        client.hset(group, "fired", "x")
        with pytest.raises(TaskFailed, match="the group cannot complete"):
            handle.get(timeout=DEADLINE)
        wait_until(lambda: len(app.dead_letters()) == 2, timeout=DEADLINE,
                   message="both members dead-lettered, naming the group")
        # the worker goes on
        assert app.tasks["canvas.add"].delay(1, 2).get(timeout=DEADLINE) == 3
    finally:
        app.close()
        client.close()


@pytest.mark.parametrize("pool", ["thread", "process"])
@pytest.mark.parametrize("damage", ["type", "deleted"])
def test_a_group_of_another_type_or_deleted_ends_the_chord_body(
        processes: Processes, server: RedisServer, pool: str, damage: str,
        tmp_path: Any) -> None:
    """The body lived only in the group's state: with the group overwritten or deleted,
    the members were dead-lettered (or not) and the body stayed "unknown" for ever.
    Each member's frame now names the body, so get() raises, naming the group key."""
    processes.worker("tests.apps.canvas", "--pool", pool, "-c", "2",
                     env={"MINITASK_BROKER_URL": server.url}, log=tmp_path / "worker.log")
    app = producer(server.url)
    client: "redis.Redis[bytes]" = server.client()
    try:
        member, total = app.tasks["canvas.member"], app.tasks["canvas.total"]
        handle = chord([member.s("a", 1, pause=1.0), member.s("b", 2, pause=1.0)],
                       total.s()).delay()
        [group] = [key for key in client.keys("minitask:{canvas:*}:group:*")
                   if not key.endswith(b":results")]
        client.delete(group)
        if damage == "type":
            client.rpush(group, "planted")
        with pytest.raises(TaskFailed, match=f"{group.decode()}.*the group cannot complete"):
            handle.get(timeout=DEADLINE)
        if damage == "type":
            wait_until(lambda: len(app.dead_letters()) == 2, timeout=DEADLINE,
                       message="both members dead-lettered, naming the group")
        assert app.tasks["canvas.add"].delay(1, 2).get(timeout=DEADLINE) == 3
    finally:
        app.close()
        client.close()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_step_marker_of_another_type_ends_the_next_step(
        processes: Processes, server: RedisServer, pool: str, tmp_path: Any) -> None:
    """A chain step whose marker is of another type: the step before it was
    dead-lettered naming the key, and the step itself stayed "unknown" for ever."""
    processes.worker("tests.apps.canvas", "--pool", pool, "-c", "2",
                     env={"MINITASK_BROKER_URL": server.url}, log=tmp_path / "worker.log")
    app = producer(server.url)
    client: "redis.Redis[bytes]" = server.client()
    try:
        member, add = app.tasks["canvas.member"], app.tasks["canvas.add"]
        handle = chain(member.s("a", 1, pause=1.0),
                       add.s(2).set(task_id=f"second-{pool}")).delay()
        marker = queue_keys("canvas", add.queue).once(f"second-{pool}")
        # its reservation (a hash, made at delay(): stores/step_ids.py) replaced
        client.delete(marker)
        client.rpush(marker, "planted")
        with pytest.raises(TaskFailed, match=marker):
            handle.get(timeout=DEADLINE)
        wait_until(lambda: len(app.dead_letters()) == 1, timeout=DEADLINE,
                   message="the first step dead-lettered, naming the marker")
        assert client.lrange(marker, 0, -1) == [b"planted"]  # left as it was
        assert add.delay(1, 2).get(timeout=DEADLINE) == 3
    finally:
        app.close()
        client.close()
