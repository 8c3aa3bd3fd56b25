"""The step a workflow frame sends once its task ends is checked before the task runs:
a planted frame whose next step lacks a field a worker's plan reads (a task node with
no ``task``, a priority that is text, a group whose member is no step) is refused,
naming the field, so its task is dead-lettered without running rather than running
and then failing as an internal error (probe 15's broken frames, one level deeper);
every frame minitask itself writes, nested workflows included, is read as before."""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, List

import msgpack  # type: ignore[import-untyped]
import pytest
import redis

from minitask import Minitask, chain, chord, group
from minitask.broker.keys import queue_keys
from minitask.errors import DecodeError
from minitask.stores.workflow_reads import frame_of
from minitask.wire.message import Message
from minitask.wire.serializer import decode_message


def _sent(make_app: Callable[..., Minitask], client: "redis.Redis[bytes]"
          ) -> tuple[Minitask, List[Message]]:
    app = make_app("wf")

    @app.task
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task
    def total(values: List[Any]) -> int:  # a nested group's result is a list
        return sum(total(value) if isinstance(value, list) else value for value in values)

    chain(add.s(1, 2), add.s(3), chord([add.s(1), group(add.s(2), chain(add.s(3), add.s(4)))],
                                       total.s()), add.s(5)).delay()
    chord([chain(add.s(1, 1), group(add.s(1), add.s(2))), add.s(0, 0)], total.s()).delay()
    chain(add.s(1, 2), add.s(3)).delay()
    # groups without a task have no queue (review 15: their frames were refused)
    chain(add.s(1, 1), group()).delay()
    chain(add.s(1, 1), group(), add.si(2, 2)).delay()
    chain(add.s(1, 1), group(add.s(1), group())).delay()
    chord([add.s(1, 1), add.s(2, 2)], group()).delay()
    chain(add.s(1, 1).on_error(add.si(0, 0)), add.s(2)).delay()
    messages = queue_keys(app.name, "default").messages
    return app, [decode_message(raw) for raw in client.hgetall(messages).values()]


def test_every_frame_minitask_writes_is_read_and_its_workflows_run(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, sent = _sent(make_app, redis_client)
    assert [message for message in sent if message.workflow is not None]
    for message in sent:
        frame_of(message)
    worker = app.worker(burst=True)
    for _ in range(200):
        if not worker.run_once():
            break
    assert app.dead_letters() == []


def _damaged(frame: Dict[str, Any], damage: str) -> Dict[str, Any]:
    frame = copy.deepcopy(frame)
    node = frame["next"]["node"]
    if damage == "task missing":
        del node["task"]
    elif damage == "priority text":
        node["p"] = "high"
    elif damage == "args a map":
        node["args"] = {"x": 1}
    elif damage == "imm a number":
        node["imm"] = 1
    elif damage == "chain without steps":
        frame["next"]["node"] = {"k": "c", "steps": []}
    elif damage == "group member no step":
        frame["next"]["node"] = {"k": "g", "id": "g", "q": "default", "ttl": 1000,
                                 "members": [node, {"k": "x"}]}
    elif damage == "priority 10":  # probe 16: the id went to the wake list, never run
        node["p"] = 10
    elif damage == "priority -3":  # probe 16: the id went into its own result list
        node["p"] = -3
    elif damage == "queue with braces":  # probe 16: written into a lane nobody serves
        node["q"] = "a:b{x}"
    elif damage == "id too long":
        node["id"] = "L" * 201
    elif damage == "eta past the year 9999":
        node["eta"] = 10 ** 18
    elif damage == "error callback lacks its args":
        errback = copy.deepcopy(node)
        del errback["args"]
        frame["err"] = [errback]
    elif damage == "nested member lacks its id":
        inner = copy.deepcopy(node)
        del inner["id"]
        frame["next"]["node"] = {"k": "c", "steps": [{"k": "g", "id": "g", "q": "default",
                                                      "ttl": 1000, "members": [inner]}]}
    return frame


@pytest.mark.parametrize("damage", ["task missing", "priority text", "args a map",
                                    "imm a number", "chain without steps",
                                    "group member no step", "nested member lacks its id",
                                    "error callback lacks its args", "priority 10",
                                    "priority -3", "queue with braces", "id too long",
                                    "eta past the year 9999"])
def test_a_next_step_a_plan_would_trip_on_is_refused_before_the_task_runs(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        damage: str) -> None:
    _, sent = _sent(make_app, redis_client)
    first = next(message for message in sent if message.workflow is not None and
                 (msgpack.unpackb(message.workflow)["next"] or {}).get("k") == "then" and
                 msgpack.unpackb(message.workflow)["next"]["node"]["k"] == "t")
    frame = _damaged(msgpack.unpackb(first.workflow), damage)
    planted = dataclasses.replace(first, workflow=msgpack.packb(frame, use_bin_type=True))
    with pytest.raises(DecodeError, match="field '(next|err)' holds (a step|an error callback)"):
        frame_of(planted)


def test_a_chord_body_a_plan_would_trip_on_ends_the_chord_naming_the_group(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    from minitask import TaskFailed
    from tests.support.chords import sent_chord
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    follows = msgpack.unpackb(redis_client.hget(group_key, "next"))
    del follows["node"]["task"]  # the body, sent once the members end, names no task
    redis_client.hset(group_key, "next", msgpack.packb(follows, use_bin_type=True))
    worker = app.worker(burst=True)
    for _ in range(20):
        if not worker.run_once():
            break
    assert seen == []
    with pytest.raises(TaskFailed, match="the group cannot complete"):
        handle.get(timeout=0)
