"""Each member of a group carries the size of the group it was sent into (its frame's
join, ``"n"``), and group_join.lua checks the group's state against it: a size someone
overwrote with another whole number (larger: the chord waited for ever, not a word said;
smaller: its body ran with results missing) is state minitask did not write, refused
naming the key, nothing written. Frames of an older minitask carry no size and run as
before; a member's index must be below the group's size in any case."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import Minitask, chord
from minitask.broker.keys import queue_keys
from minitask.errors import DecodeError
from minitask.stores.workflow_reads import frame_of
from minitask.wire.serializer import decode_message, encode_message, pack_data, unpack_data
from tests.support.chords import body_ended, sent_chord


def _frames(app: Minitask, client: "redis.Redis[bytes]") -> Dict[bytes, Any]:
    """By message id, the frames of the messages in the default queue."""
    raw = client.hgetall(queue_keys(app.name, "default").messages)
    return {task_id: unpack_data(decode_message(body).workflow, "frame")
            for task_id, body in raw.items()}


def _rewrite(app: Minitask, client: "redis.Redis[bytes]", change: Callable[[Any], None]) -> None:
    """Rewrite each queued message's frame with ``change`` (an older minitask's, say)."""
    messages = queue_keys(app.name, "default").messages
    for task_id, body in client.hgetall(messages).items():
        message = decode_message(body)
        frame = unpack_data(message.workflow, "frame")
        change(frame)
        client.hset(messages, task_id, encode_message(dataclasses.replace(
            message, workflow=pack_data(frame, "frame"))))


@pytest.mark.parametrize("planted", ["3", "100000000", "1"])
def test_a_group_of_another_size_ends_the_body_naming_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        planted: str) -> None:
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    assert sorted(frame["next"]["n"] for frame in _frames(app, redis_client).values()) == [2, 2]
    redis_client.hset(group_key, "size", planted)
    letters = body_ended(app, seen, handle, f"{group_key.decode()}.*its size is {planted}, "
                                            f"but member [01] was sent into a group of 2")
    assert len(letters) == 2 and all(group_key.decode() in letter for letter in letters)
    assert redis_client.hget(group_key, "size") == planted.encode()  # left as it was
    assert redis_client.hlen(group_key + b":results") == 0  # nothing written


def test_frames_of_an_older_minitask_without_the_size_run_as_before(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app("wf")
    seen: List[List[int]] = []

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(retries=0)
    def total(values: List[int]) -> None:
        seen.append(values)

    handle = chord([add.s(1, 1), add.s(2, 2)], total.s()).delay()

    def older(frame: Any) -> None:  # as 0.1.0 wrote them: no size, nor "a"
        frame["next"].pop("n", None)
        frame["next"].pop("a", None)

    _rewrite(app, redis_client, older)
    assert all("n" not in frame["next"] for frame in _frames(app, redis_client).values())
    worker = app.worker(burst=True)
    for _ in range(20):
        if not worker.run_once():
            break
    assert seen == [[2, 4]]
    assert handle.status() == "succeeded"
    assert app.dead_letters() == []


def test_a_member_whose_index_is_not_below_the_size_is_refused(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """No size carried (an older frame), the group's size planted below the index."""
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    group_id = group_key.decode().rsplit(":", 1)[-1]
    reply = app.broker.workflows._join(  # type: ignore[attr-defined]
        {"k": "join", "q": "default", "id": group_id, "i": 2, "ttl": 60_000}, "ok",
        pack_data(1, "result"))
    assert reply[0] == b"corrupt"
    assert f"key {group_key.decode()} holds no group minitask wrote (its size is 2, but " \
           f"member 2 has no index below it)" == reply[1].decode()
    assert redis_client.hlen(group_key + b":results") == 0


@pytest.mark.parametrize("size", ["2", 2.0, True, None, [2]])
def test_a_frame_whose_join_carries_a_size_that_is_no_int_is_refused(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        size: Any) -> None:
    app, _, _, _ = sent_chord(make_app, redis_client)

    def planted(frame: Any) -> None:
        frame["next"]["n"] = size

    _rewrite(app, redis_client, planted)
    raw = redis_client.hgetall(queue_keys(app.name, "default").messages)
    for body in raw.values():
        with pytest.raises(DecodeError, match="field 'next' holds"):
            frame_of(decode_message(body))
