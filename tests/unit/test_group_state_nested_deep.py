"""A group's state whose ``next`` or ``failed`` field holds msgpack nested a thousand
levels deep ends the chord's body, naming the group's key, rather than leaving it
pending until its TTL; the member that meets it is dead-lettered saying what is wrong
(probe 18: ``repr`` of the whole value raised RecursionError, and the member was
dead-lettered as "(undecodable) ... internal error: RecursionError"). A workflow frame
whose ``max`` is nested as deep is refused naming the field."""
from __future__ import annotations

import time
from typing import Callable, Dict

import msgpack  # type: ignore[import-untyped]
import pytest
import redis

from minitask import Minitask
from minitask.errors import DecodeError
from minitask.stores.workflow_reads import Failure, frame_of
from minitask.wire.message import Message
from tests.support.chords import planted_state_ends_body

DEEP = b"\x91" * 1000 + b"\x90"  # [[[...[]...]]], a thousand levels
PLANTS: Dict[str, Dict[str, bytes]] = {
    "next nested deep": {"next": DEEP},
    "failed nested deep": {"failed_index": b"0", "failed": DEEP},
    "failed holding a part nested deep": {
        "failed_index": b"0", "failed": b"\x95" + DEEP + b"\xa1a\xa1b\xa1c\xa1d"},
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_group_state_field_nested_deep_ends_the_body_naming_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        plant: str) -> None:
    messages, group_key = planted_state_ends_body(make_app, redis_client, PLANTS[plant])
    assert messages, "the member that met it is dead-lettered, saying why"
    assert any("not what minitask writes" in message and group_key.decode() in message
               and "RecursionError" not in message and "(undecodable)" not in message
               for message in messages), messages
    assert all(len(message) < 2_000 for message in messages), messages


def test_a_failure_holding_a_part_that_is_no_text_is_refused() -> None:
    for packed in (DEEP, b"\x95" + DEEP + b"\xa1a\xa1b\xa1c\xa1d",
                   msgpack.packb(["a", "b", 3, "d", "e"])):
        with pytest.raises(DecodeError, match="not what minitask writes") as caught:
            Failure.unpacked(packed)
        assert len(str(caught.value)) < 300


def test_a_frame_whose_max_is_nested_deep_is_refused_naming_the_field() -> None:
    frame = b"\x82\xa1v\x01\xa3max" + DEEP
    message = Message(id="wfdeep0000000000000001", task="t.ping", args=[1], kwargs={},
                      queue="a", priority=5, enqueued_at_ms=int(time.time() * 1000),
                      workflow=frame)
    with pytest.raises(DecodeError, match="field 'max' is ") as caught:
        frame_of(message)
    assert len(str(caught.value)) < 500
